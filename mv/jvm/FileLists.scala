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
 * Only tables of up to MaxFiles files and SmallDeltaScans.MaxBytes bytes, without column
 * mapping, whose checksum says how many files they hold; anything else is left to Delta. A file
 * with a deletion vector is kept with it, and the scan skips its deleted rows as Delta's does. A
 * table whose id changed (replaced), a commit no longer in the log, or more than MaxCommits
 * commits to read list the table again. Paths are compared as Delta's log replay
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

  private case class Listed(tableId: String, version: Long, files: Map[String, AddFile])

  private val kept = new java.util.LinkedHashMap[String, Listed](16, 0.75f, true) {
    override def removeEldestEntry(eldest: java.util.Map.Entry[String, Listed]): Boolean = size > MaxTables
  }

  /** The snapshot's files, from the list kept for its table (brought to its version), or listed
   *  now by a Spark job when `seed`; None when the table is not one to list. */
  def of(snapshot: Snapshot, seed: Boolean): Option[Seq[AddFile]] =
    if (!eligible(snapshot)) None
    else try {
      val key = snapshot.deltaLog.logPath.toString
      val found = synchronized(Option(kept.get(key)))
        .filter(l => l.tableId == snapshot.metadata.id && l.version <= snapshot.version)
        .flatMap(advanced(snapshot, _))
        .orElse(if (seed) Some(listed(snapshot)) else None)
      found.map { l =>
        synchronized(if (replaces(key, l.tableId, l.version)) kept.put(key, l))
        l.files.values.toSeq
      }
    } catch {
      case NonFatal(_) => None  // Delta plans the scan, as it would without this list
    }

  /** Keep a list read elsewhere (a checksum's), so the table's next versions advance from it. */
  def remember(snapshot: Snapshot, files: Seq[AddFile]): Unit = {
    val key = snapshot.deltaLog.logPath.toString
    def newer: Boolean = replaces(key, snapshot.metadata.id, snapshot.version)
    // Every scan of a small table passes here: the list is keyed only when it is kept.
    if (synchronized(newer) && eligible(snapshot)) {
      val canonical = canonicalizer(snapshot)
      val l = Listed(snapshot.metadata.id, snapshot.version, files.map(f => canonical(f.path) -> f).toMap)
      synchronized(if (newer) kept.put(key, l))
    }
  }

  /** Whether a list of the table `tableId` at `version` should replace the one kept under `key`:
   *  none kept, an older version, or another table at the same place (dropped and created again,
   *  whose versions start anew). */
  private def replaces(key: String, tableId: String, version: Long): Boolean =
    Option(kept.get(key)).forall(l => l.tableId != tableId || l.version < version)

  private def eligible(snapshot: Snapshot): Boolean =
    snapshot.version >= 0 && snapshot.metadata.columnMappingMode == NoMapping &&
      snapshot.checksumOpt.exists(crc => crc.numFiles <= MaxFiles && crc.tableSizeBytes <= SmallDeltaScans.MaxBytes)

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
