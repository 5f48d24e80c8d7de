package org.integrationhub.delta;

import io.delta.storage.HDFSLogStore;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Delta's HDFS log store for tables on a local file system, listing a table's log by name first.
 *
 * <p>Before a query Delta asks its log store for the log files from the last checkpoint on
 * ({@code listFrom}). Delta's own store lists the whole {@code _delta_log} folder with Hadoop's
 * {@code listStatus}, which on a local file system reads the size, time and kind of every file
 * (several system calls and a qualified path each) and only then keeps the names from the
 * checkpoint on. A table landed by a 1 s trigger keeps tens of thousands of log files within its
 * log retention, so that listing cost more than the query itself after compaction
 * ({@code bench/maintenance.py}). This store reads the folder's names (one directory read),
 * keeps those from the asked name on, and asks the file system about those alone: a few dozen
 * files, whatever the log's length.
 *
 * <p>Writing, and listing on any other file system, are Delta's own.
 */
public final class NameFirstLogStore extends HDFSLogStore {

  public NameFirstLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    Path parent = path.getParent();
    File folder;
    if (fs instanceof LocalFileSystem local) {
      folder = local.pathToFile(parent);
    } else if (fs instanceof RawLocalFileSystem raw) {
      folder = raw.pathToFile(parent);
    } else {
      return super.listFrom(path, hadoopConf);
    }
    String[] names = folder.list();
    if (names == null) {
      throw new FileNotFoundException("No such log folder: " + parent);
    }
    String first = path.getName();
    List<FileStatus> found = new ArrayList<>();
    for (String name : Arrays.stream(names).filter(n -> n.compareTo(first) >= 0).sorted().toList()) {
      if (name.startsWith(".") && name.endsWith(".crc")) {
        continue; // Hadoop's checksum of a file, which its listing leaves out too
      }
      try {
        found.add(fs.getFileStatus(new Path(parent, name)));
      } catch (FileNotFoundException removed) {
        // Cleaned up between the two reads, as a listing taken a moment later would not show it.
      }
    }
    return found.iterator();
  }
}
