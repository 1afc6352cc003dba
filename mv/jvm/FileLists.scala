package io.mvengine

import java.net.URI

import scala.util.Try
import scala.util.control.NonFatal

import org.apache.hadoop.fs.Path

import org.apache.spark.sql.delta.{NoMapping, Snapshot}
import org.apache.spark.sql.delta.actions.{AddFile, Metadata, RemoveFile}

/**
 * The files of Delta tables too large for their checksum to list them (over 50 files), kept in
 * the driver per table and brought to a newer version by reading that version's commits, as
 * Delta's own log replay would apply them: a scan of such a table (SmallDeltaScans) then needs
 * no Spark job to find its files, where Delta's data skipping runs one or two per query
 * ("Filtering files for query", 0.1-0.4 s each on two cores). A table is listed once, by one
 * Spark job over its state, the first time a scan asks (`seed`); from then on each new version
 * costs the driver a read of its commit files.
 *
 * A few versions are kept per table (VersionsKept), not only the newest: a refresh reads a source
 * at its new version and, in the terms of another read, at the version of the last refresh
 * (time travel), and a version older than every one kept would be listed again by a job each
 * time (2.9 s of a 1,000-bid refresh of bench/joins.py's `top_per_minute`, a self-join, at 1M).
 * A version is listed from the newest kept version at or below it.
 *
 * Only tables of up to MaxFiles files, of any size (the driver's work is per file), without
 * column mapping, whose checksum says how many files they hold; anything else is left to Delta.
 * A file with a deletion vector is kept with it, and the scan skips its deleted rows as Delta's
 * does. A table whose id changed (replaced), a commit no longer in the log, or more than
 * MaxCommits commits to read list the table again. Paths are compared as Delta's log replay
 * compares them (DeltaLog's path canonicalization), so a file removed by a later commit is gone
 * however its path was written.
 *
 * Example: a 150-file source appended to between two refreshes: the second refresh's scans read
 * the list of the first, plus the one commit between, from the driver.
 */
object FileLists {
  /** Tables with more files are left to Delta's scan planning. */
  val MaxFiles = 20000
  /** More commits than this since the version kept: the table is listed again. */
  private val MaxCommits = 200
  /** Tables kept at once (the least recently used goes first). */
  private val MaxTables = 32
  /** Versions kept per table (the oldest goes first): a refresh's new and previous ones, and a few more. */
  private val VersionsKept = 4

  private case class Listed(tableId: String, version: Long, files: Map[String, AddFile])

  /** Per table, its kept versions, newest first, all of one table id. */
  private val kept = new java.util.LinkedHashMap[String, List[Listed]](16, 0.75f, true) {
    override def removeEldestEntry(eldest: java.util.Map.Entry[String, List[Listed]]): Boolean = size > MaxTables
  }

  /** The snapshot's files, from the newest list kept for its table at or below its version (brought
   *  to it), or listed now by a Spark job when `seed`; None when the table is not one to list. */
  def of(snapshot: Snapshot, seed: Boolean): Option[Seq[AddFile]] =
    if (!eligible(snapshot)) None
    else try {
      val key = snapshot.deltaLog.logPath.toString
      val found = synchronized(Option(kept.get(key)).getOrElse(Nil))
        .find(l => l.tableId == snapshot.metadata.id && l.version <= snapshot.version)
        .flatMap(advanced(snapshot, _))
        .orElse(if (seed) Some(listed(snapshot)) else None)
      found.map { l =>
        keep(key, l)
        l.files.values.toSeq
      }
    } catch {
      case NonFatal(_) => None  // Delta plans the scan, as it would without this list
    }

  /** Keep a list read elsewhere (a checksum's), so the table's next versions advance from it. */
  def remember(snapshot: Snapshot, files: Seq[AddFile]): Unit = {
    val key = snapshot.deltaLog.logPath.toString
    // Every scan of a small table passes here: the list is keyed only when it is kept.
    if (synchronized(adds(key, snapshot.metadata.id, snapshot.version)) && eligible(snapshot)) {
      val canonical = canonicalizer(snapshot)
      keep(key, Listed(snapshot.metadata.id, snapshot.version, files.map(f => canonical(f.path) -> f).toMap))
    }
  }

  /** `l` among its table's kept versions: the newest VersionsKept stay; another table at the same
   *  place (dropped and created again, whose versions start anew) replaces them all. */
  private def keep(key: String, l: Listed): Unit = synchronized {
    if (adds(key, l.tableId, l.version)) {
      val others = Option(kept.get(key)).getOrElse(Nil).filter(_.tableId == l.tableId)
      kept.put(key, (l :: others).sortBy(-_.version).take(VersionsKept))
    }
  }

  /** Whether a list of the table `tableId` at `version` is not kept yet and would stay kept. */
  private def adds(key: String, tableId: String, version: Long): Boolean = {
    val same = Option(kept.get(key)).getOrElse(Nil).filter(_.tableId == tableId)
    !same.exists(_.version == version) && (same.size < VersionsKept || same.exists(_.version < version))
  }

  private def eligible(snapshot: Snapshot): Boolean =
    snapshot.version >= 0 && snapshot.metadata.columnMappingMode == NoMapping &&
      snapshot.checksumOpt.exists(_.numFiles <= MaxFiles)

  /** `l` brought to the snapshot's version by the commits after it; None when that cannot be done
   *  exactly (a commit missing, a change of column mapping). */
  private def advanced(snapshot: Snapshot, l: Listed): Option[Listed] =
    if (l.version == snapshot.version) Some(l)
    else if (snapshot.version - l.version > MaxCommits) None
    else Try {
      val canonical = canonicalizer(snapshot)
      val commits = DeltaTables.commits(snapshot.deltaLog, l.version + 1, snapshot.version)
        .getOrElse(throw new IllegalStateException("a commit is missing"))
      // A commit that gives a file a deletion vector removes it and adds it again: removes first.
      val files = commits.map(_._2).foldLeft(l.files) { (files, actions) =>
        if (actions.exists { case m: Metadata => m.columnMappingMode != NoMapping; case _ => false }) {
          throw new IllegalStateException("column mapping")
        }
        val removed = files -- actions.collect { case remove: RemoveFile => canonical(remove.path) }
        removed ++ actions.collect { case add: AddFile => canonical(add.path) -> add.copy(dataChange = false) }
      }
      Listed(l.tableId, snapshot.version, files)
    }.toOption

  /** Every file of the snapshot, by one Spark job over its state. */
  private def listed(snapshot: Snapshot): Listed = {
    val files = snapshot.allFiles.collect().toSeq
    val canonical = canonicalizer(snapshot)
    Listed(snapshot.metadata.id, snapshot.version, files.map(f => canonical(f.path) -> f).toMap)
  }

  /** A path as Delta's log replay keys it: a path with no scheme qualified by the table's file
   *  system, any other (relative, or qualified already) as its URI. */
  private def canonicalizer(snapshot: Snapshot): String => String = {
    val fs = snapshot.deltaLog.dataPath.getFileSystem(snapshot.deltaLog.newDeltaHadoopConf())
    path => {
      val p = new Path(new URI(path))
      if (p.isAbsoluteAndSchemeAuthorityNull) fs.makeQualified(p).toUri.toString else p.toUri.toString
    }
  }
}
