// Drives Hive's own streaming writer (org.apache.hive.streaming.HiveStreamingConnection) one step
// per line read from stdin, so a test can check the table between steps. Commands:
//   connect <metastore uri> <db> <table> <batch size> [static partition values, comma-separated]
//   begin | write <delimited row> | commit | abort | close | quit
// Each answers one line on stdout: "ok <detail>" or "error <exception class>: <message>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hive.streaming.HiveStreamingConnection;
import org.apache.hive.streaming.StrictDelimitedInputWriter;

public class StreamingDriver {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        HiveStreamingConnection conn = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 2);
            String cmd = parts[0];
            String rest = parts.length > 1 ? parts[1] : "";
            try {
                switch (cmd) {
                    case "connect": {
                        String[] a = rest.split(" ");
                        HiveConf conf = new HiveConf();
                        conf.set("hive.metastore.uris", a[0]);
                        conf.set("hive.txn.manager", "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager");
                        conf.setBoolean("hive.support.concurrency", true);
                        conf.set("hive.metastore.client.socket.timeout", "60s");
                        conf.set("fs.defaultFS", "file:///");
                        // the raw local file system: hflush() reaches the file, as on HDFS (the
                        // default checksummed one keeps a committed txn's bytes in its buffers)
                        conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
                        conf.setBoolean("fs.file.impl.disable.cache", true);
                        StrictDelimitedInputWriter writer =
                            StrictDelimitedInputWriter.newBuilder().withFieldDelimiter(',').build();
                        HiveStreamingConnection.Builder b = HiveStreamingConnection.newBuilder()
                            .withDatabase(a[1]).withTable(a[2])
                            .withTransactionBatchSize(Integer.parseInt(a[3]))
                            .withAgentInfo("hivemesh-tests").withRecordWriter(writer).withHiveConf(conf);
                        if (a.length > 4) {
                            List<String> values = Arrays.asList(a[4].split(","));
                            b = b.withStaticPartitionValues(values);
                        }
                        conn = b.connect();
                        System.out.println("ok connected");
                        break;
                    }
                    case "begin":
                        conn.beginTransaction();
                        System.out.println("ok begun");
                        break;
                    case "write":
                        conn.write(rest.getBytes(StandardCharsets.UTF_8));
                        System.out.println("ok written");
                        break;
                    case "commit":
                        conn.commitTransaction();
                        System.out.println("ok committed");
                        break;
                    case "abort":
                        conn.abortTransaction();
                        System.out.println("ok aborted");
                        break;
                    case "close":
                        conn.close();
                        System.out.println("ok closed");
                        break;
                    case "quit":
                        System.out.println("ok bye");
                        System.out.flush();
                        System.exit(0);
                        break;
                    default:
                        System.out.println("error unknown command " + cmd);
                }
            } catch (Throwable t) {
                String msg = String.valueOf(t.getMessage()).replace('\n', ' ');
                Throwable c = t.getCause();
                String cause = c == null ? "" : " (cause " + c.getClass().getName() + ": "
                    + String.valueOf(c.getMessage()).replace('\n', ' ') + ")";
                System.out.println("error " + t.getClass().getName() + ": " + msg + cause);
            }
            System.out.flush();
        }
    }
}
