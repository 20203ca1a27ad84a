// Copy one file with Hadoop's own Java client (FileSystem API), for bench/hdfs.py's "JVM helper"
// candidate: what a small JVM process copying through Hadoop's client achieves.
//
// Usage: java -cp <classes>:<hadoop jars>/* HdfsCopy SRC_URI DST_URI
// (file:/... or hdfs://host:port/...). Local files go through RawLocalFileSystem (no .crc side
// files). Prints one line of JSON: {"bytes": N, "millis": N} (the copy alone, JVM start excluded).

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.fs.Path;

public final class HdfsCopy {
    private HdfsCopy() {
    }

    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
        conf.setBoolean("fs.file.impl.disable.cache", true);
        conf.set("dfs.client.block.write.replace-datanode-on-failure.policy", "NEVER");
        Path src = new Path(args[0]);
        Path dst = new Path(args[1]);
        FileSystem srcFs = src.getFileSystem(conf);
        FileSystem dstFs = dst.getFileSystem(conf);
        long began = System.nanoTime();
        FileUtil.copy(srcFs, src, dstFs, dst, false, true, conf);
        long millis = (System.nanoTime() - began) / 1_000_000;
        long bytes = dstFs.getFileStatus(dst).getLen();
        System.out.println("{\"bytes\": " + bytes + ", \"millis\": " + millis + "}");
    }
}
