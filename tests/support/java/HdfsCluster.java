// An HDFS for tests: one NameNode and one DataNode (Hadoop's MiniDFSCluster, from the
// hadoop-client-minicluster jar) on loopback ports chosen by the system, with WebHDFS on.
//
// Usage: java -cp <classes>:<hadoop-minicluster lib>/* HdfsCluster BASE_DIR
// Formats a fresh name directory under BASE_DIR, writes BASE_DIR/conf/{core,hdfs}-site.xml (the
// client side of the cluster's configuration), prints one line of JSON
//   {"rpc_port": N, "http_port": N, "conf_dir": "..."}
// and runs until its standard input closes, then shuts the cluster down and exits 0.

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public final class HdfsCluster {
    private HdfsCluster() {
    }

    public static void main(String[] args) throws Exception {
        File base = new File(args[0]);
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(base, "data").getAbsolutePath());
        conf.setBoolean("dfs.webhdfs.enabled", true);
        conf.setInt("dfs.replication", 1);
        conf.setBoolean("dfs.permissions.enabled", false);
        // append (hflush readers, Hive streaming's reopen) with one DataNode: never look for another
        conf.set("dfs.client.block.write.replace-datanode-on-failure.policy", "NEVER");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .numDataNodes(1)
                .format(true)
                .build();
        cluster.waitActive();
        Configuration client = cluster.getConfiguration(0);
        File confDir = new File(base, "conf");
        confDir.mkdirs();
        Configuration core = new Configuration(false);
        core.set("fs.defaultFS", client.get("fs.defaultFS"));
        write(core, new File(confDir, "core-site.xml"));
        Configuration hdfs = new Configuration(false);
        hdfs.set("dfs.replication", "1");
        hdfs.set("dfs.namenode.http-address", client.get("dfs.namenode.http-address"));
        hdfs.set("dfs.client.block.write.replace-datanode-on-failure.policy", "NEVER");
        write(hdfs, new File(confDir, "hdfs-site.xml"));
        int rpcPort = cluster.getNameNodePort();
        int httpPort = cluster.getNameNode().getHttpAddress().getPort();
        System.out.println("{\"rpc_port\": " + rpcPort + ", \"http_port\": " + httpPort
                + ", \"conf_dir\": \"" + confDir.getAbsolutePath().replace("\\", "\\\\").replace("\"", "\\\"")
                + "\"}");
        System.out.flush();
        byte[] buffer = new byte[256];
        while (System.in.read(buffer) >= 0) {
            // wait for the end of standard input: the test session is over, or its process died
        }
        cluster.shutdown();
        System.exit(0);
    }

    private static void write(Configuration conf, File file) throws Exception {
        try (OutputStream out = new FileOutputStream(file)) {
            conf.writeXml(out);
        }
    }
}
