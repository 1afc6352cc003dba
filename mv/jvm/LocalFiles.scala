package io.mvengine

import java.io.IOException
import java.net.URI
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermission

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{ChecksumFs, DelegateToFileSystem, FileStatus, FsConstants, FsServerDefaults,
  LocalFileSystem, Path, RawLocalFileSystem}
import org.apache.hadoop.fs.local.LocalConfigKeys
import org.apache.hadoop.fs.permission.FsPermission
import org.apache.spark.SparkContext

/**
 * The local file system (`file:`) without a forked process per file: Hadoop's own, but for
 * setting a file's permissions and reading whether it is a symbolic link, which it does with
 * system calls (java.nio) instead of running `chmod` and `readlink`.
 *
 * Why: without Hadoop's native library, which pyspark does not ship, RawLocalFileSystem runs
 * `chmod` for every file it creates and `readlink` each time FileContext renames one. A Delta
 * commit writes its log entry and checksum through FileContext (HDFSLogStore: a temporary file
 * and its `.crc`, then a rename without overwrite), twelve processes each; every Parquet file
 * and its `.crc` two more. Measured (bench/fixed_cost.py, a /tmp JFR probe): 1,363 processes
 * in 35 rounds of a 1,000-row append and a refresh, 4-7 ms each from the 4 GB driver.
 *
 * What stays Hadoop's: every other operation, the checksum files, the rename's refusal to
 * overwrite (FileContext checks the destination first, as before), and a symbolic link's status
 * (read Hadoop's way, by the process). Permissions NIO cannot set (a sticky or set-id bit) are
 * set Hadoop's way too.
 *
 * The engine's extension installs them (`install`) in the SparkContext's Hadoop settings when
 * Spark runs in one JVM (a `local` master) and no setting names either local file system:
 * {{{
 *   fs.file.impl                     io.mvengine.LocalFiles$FileSystem
 *   fs.file.impl.disable.cache       true
 *   fs.AbstractFileSystem.file.impl  io.mvengine.LocalFiles$Fs
 * }}}
 * Hadoop caches one FileSystem per scheme, and spark-submit creates the local one before the
 * extension's jar is loaded, so `file:` is no longer cached: each lookup makes a new instance
 * (no I/O, a few objects). A session whose settings name either local file system keeps what
 * they name: `spark.hadoop.fs.file.impl=org.apache.hadoop.fs.LocalFileSystem` keeps Hadoop's.
 */
object LocalFiles {

  /** RawLocalFileSystem, setting permissions and reading link status by system calls. */
  class RawFileSystem extends RawLocalFileSystem {
    override def setPermission(p: Path, permission: FsPermission): Unit =
      posix(permission.toShort) match {
        case Some(set) => Files.setPosixFilePermissions(pathToFile(p).toPath, set)
        case None => super.setPermission(p, permission)
      }

    /** A file's or directory's status, as Hadoop gives it for anything but a symbolic link: Hadoop
     *  runs `readlink` on the path's URI text, which names no file, so it always falls back to this. */
    override def getFileLinkStatus(f: Path): FileStatus =
      if (Files.isSymbolicLink(pathToFile(f).toPath)) super.getFileLinkStatus(f) else getFileStatus(f)
  }

  /** `fs.file.impl`: Hadoop's LocalFileSystem (checksums beside the files) over RawFileSystem. */
  class FileSystem extends LocalFileSystem(new RawFileSystem)

  /** FileContext's raw local file system (Hadoop's RawLocalFs) over RawFileSystem. */
  class RawFs(uri: URI, conf: Configuration)
      extends DelegateToFileSystem(uri, new RawFileSystem, conf, FsConstants.LOCAL_FS_URI.getScheme, false) {
    override def getUriDefaultPort: Int = -1
    @throws[IOException] override def getServerDefaults(f: Path): FsServerDefaults = LocalConfigKeys.getServerDefaults
    @throws[IOException] override def getServerDefaults: FsServerDefaults = LocalConfigKeys.getServerDefaults
    override def isValidName(src: String): Boolean = true  // as Hadoop's: the OS decides
  }

  /** `fs.AbstractFileSystem.file.impl`: FileContext's local file system (Hadoop's LocalFs) over RawFs.
   *  Hadoop makes it by its (URI, Configuration) constructor, the only one. */
  class Fs(uri: URI, conf: Configuration) extends ChecksumFs(new RawFs(uri, conf))

  /** Names these classes in `context`'s Hadoop settings (`installIn`); whether they are named now. */
  def install(context: SparkContext): Boolean = installIn(context.master, context.hadoopConfiguration)

  /** Names these classes in `conf` for a local master (`local`, `local[4]`; not `local-cluster`,
   *  whose executors are other JVMs), unless a setting (`spark.hadoop.*`, or code) already names
   *  either local file system, Hadoop's included; whether they are named now.
   *  Example: installIn("local[*]", new Configuration()) sets fs.file.impl and the other two. */
  def installIn(master: String, conf: Configuration): Boolean = {
    val named = Seq(FileSystemKey, FsKey).exists(key =>
      Option(conf.getPropertySources(key)).exists(_.exists(_ != "core-default.xml")))
    if ((master == "local" || master.startsWith("local[")) && !named) {
      conf.set(FileSystemKey, classOf[FileSystem].getName)
      conf.setBoolean("fs.file.impl.disable.cache", true)
      conf.set(FsKey, classOf[Fs].getName)
    }
    conf.get(FileSystemKey) == classOf[FileSystem].getName && conf.get(FsKey) == classOf[Fs].getName
  }

  private val FileSystemKey = "fs.file.impl"
  private val FsKey = "fs.AbstractFileSystem.file.impl"

  private val bits = Seq(
    PosixFilePermission.OWNER_READ -> 256, PosixFilePermission.OWNER_WRITE -> 128,
    PosixFilePermission.OWNER_EXECUTE -> 64, PosixFilePermission.GROUP_READ -> 32,
    PosixFilePermission.GROUP_WRITE -> 16, PosixFilePermission.GROUP_EXECUTE -> 8,
    PosixFilePermission.OTHERS_READ -> 4, PosixFilePermission.OTHERS_WRITE -> 2,
    PosixFilePermission.OTHERS_EXECUTE -> 1)

  /** The permission bits as NIO's set, None for bits it cannot set (sticky, set-id) or no POSIX
   *  file system. Example: 0644 gives OWNER_READ, OWNER_WRITE, GROUP_READ, OTHERS_READ. */
  def posix(mode: Short): Option[java.util.Set[PosixFilePermission]] =
    if ((mode & ~0x1ff) != 0 || !posixFiles) None
    else {
      val set = java.util.EnumSet.noneOf(classOf[PosixFilePermission])
      bits.foreach { case (p, bit) => if ((mode & bit) != 0) set.add(p) }
      Some(set)
    }

  private lazy val posixFiles = java.nio.file.FileSystems.getDefault.supportedFileAttributeViews.contains("posix")
}
