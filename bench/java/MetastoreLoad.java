// A JVM load client for bench/metastore.py: times metastore calls as Java clients (Spark's and
// Trino's Hive connectors) make them, on the Thrift client that HiveMetaStoreClient wraps
// (ThriftHiveMetastore.Client, TBinaryProtocol over an unframed TSocket, as HiveMetaStoreClient
// opens it without SASL), so the reply is decoded in Java and not by the Python bindings.
//
//   java MetastoreLoad <host> <port> <db> <table> <partitioned table> <step>...
//
// A step is one of
//   single:<op>:<calls>:<warmup>              one connection, <warmup> untimed calls, then <calls>
//   concurrent:<op>:<clients>:<seconds>:<warmup>
//                                             <clients> threads, each with its own connection and
//                                             <warmup> untimed calls; once all are ready one window
//                                             of <seconds> for all; the calls that complete inside
//                                             it are counted
// <op>: get_table, get_table_req, get_partitions, get_partition_names (of <partitioned table>),
// create_table (tables jload_<n>, copies of <table> with their own location; a warm-up call is a
// create and a drop), drop_table (the tables the create_table steps before it created, in order).
//
// Prints one JSON line per step: {"step": ..., "op": ..., "calls": n, "mean_ms", "p50_ms", "p99_ms",
// "ops_per_s", "seconds"} or {"step": ..., "op": ..., "error": "..."}. Before a concurrent window it
// prints {"window": ..., "start_ns": ..., "end_ns": ...} (System.nanoTime, CLOCK_MONOTONIC on Linux,
// the clock of Python's time.monotonic) so the caller can read the server's CPU over the window.
// Exit 0 unless the arguments are wrong; a failing step answers its error and the next one runs.
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.hadoop.hive.metastore.api.GetTableRequest;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.transport.TSocket;
import org.apache.thrift.transport.TTransport;

public class MetastoreLoad {
    static String host;
    static int port;
    static String db;
    static String table;
    static String ptable;
    static final List<String> created = new ArrayList<>();
    static int nextTable = 0;

    interface Call {
        void run() throws Exception;
    }

    static final class Conn implements AutoCloseable {
        final TTransport transport;
        final ThriftHiveMetastore.Client client;

        Conn() throws Exception {
            transport = new TSocket(host, port, 600_000);
            client = new ThriftHiveMetastore.Client(new TBinaryProtocol(transport));
            transport.open();
        }

        @Override
        public void close() {
            transport.close();
        }
    }

    /** The call of read-only op on conn; null for the write ops. */
    static Call readCall(String op, Conn c) {
        ThriftHiveMetastore.Client client = c.client;
        switch (op) {
            case "get_table":
                return () -> client.get_table(db, table);
            case "get_table_req": {
                GetTableRequest req = new GetTableRequest(db, table);
                return () -> client.get_table_req(req);
            }
            case "get_partitions":
                return () -> {
                    int n = client.get_partitions(db, ptable, (short) -1).size();
                    if (n == 0) throw new IllegalStateException("get_partitions returned no partition");
                };
            case "get_partition_names":
                return () -> {
                    int n = client.get_partition_names(db, ptable, (short) -1).size();
                    if (n == 0) throw new IllegalStateException("get_partition_names returned no name");
                };
            default:
                return null;
        }
    }

    /** A copy of the template table named jload_N, with its own location. */
    static Table newTable(Table template) {
        Table t = template.deepCopy();
        String name = "jload_" + nextTable++;
        t.setTableName(name);
        t.setCreateTime(0);
        java.util.Map<String, String> params = new java.util.HashMap<>();
        if (template.getParameters() != null) params.putAll(template.getParameters());
        params.remove("transient_lastDdlTime");
        t.setParameters(params);
        String loc = template.getSd().getLocation();
        t.getSd().setLocation(loc.substring(0, loc.lastIndexOf('/') + 1) + name);
        return t;
    }

    static double[] stats(long[] nanos, int n) {
        long[] s = Arrays.copyOf(nanos, n);
        Arrays.sort(s);
        double sum = 0;
        for (long x : s) sum += x;
        return new double[] {
            n == 0 ? 0 : sum / n / 1e6,
            n == 0 ? 0 : s[n / 2] / 1e6,
            n == 0 ? 0 : s[Math.min(n - 1, (int) Math.ceil(0.99 * n) - 1)] / 1e6,
        };
    }

    static String json(String step, String op, int calls, double[] st, double seconds) {
        return String.format(
            java.util.Locale.ROOT,
            "{\"step\": \"%s\", \"op\": \"%s\", \"calls\": %d, \"mean_ms\": %.4f, \"p50_ms\": %.4f, "
                + "\"p99_ms\": %.4f, \"seconds\": %.4f, \"ops_per_s\": %.2f}",
            step, op, calls, st[0], st[1], st[2], seconds, seconds > 0 ? calls / seconds : 0.0);
    }

    static String error(String step, String op, Throwable e) {
        String msg = (e.getClass().getName() + ": " + e.getMessage()).replace("\\", "\\\\").replace("\"", "'");
        return String.format("{\"step\": \"%s\", \"op\": \"%s\", \"error\": \"%s\"}", step, op,
            msg.replaceAll("[\\r\\n\\t]", " "));
    }

    static String single(String step, String op, int calls, int warmup) throws Exception {
        long[] lat = new long[calls];
        try (Conn c = new Conn()) {
            long t0 = System.nanoTime();
            if (op.equals("create_table") || op.equals("drop_table")) {
                Table template = c.client.get_table_req(new GetTableRequest(db, table)).getTable();
                for (int i = 0; i < warmup; i++) {
                    Table t = newTable(template);
                    c.client.create_table(t);
                    c.client.drop_table(db, t.getTableName(), true);
                }
                t0 = System.nanoTime();
                if (op.equals("create_table")) {
                    for (int i = 0; i < calls; i++) {
                        Table t = newTable(template);
                        long s = System.nanoTime();
                        c.client.create_table(t);
                        lat[i] = System.nanoTime() - s;
                        created.add(t.getTableName());
                    }
                } else {
                    if (created.size() < calls) {
                        throw new IllegalStateException("drop_table needs " + calls + " tables made by create_table");
                    }
                    for (int i = 0; i < calls; i++) {
                        String name = created.remove(0);
                        long s = System.nanoTime();
                        c.client.drop_table(db, name, true);
                        lat[i] = System.nanoTime() - s;
                    }
                }
            } else {
                Call call = readCall(op, c);
                if (call == null) throw new IllegalArgumentException("unknown op " + op);
                for (int i = 0; i < warmup; i++) call.run();
                t0 = System.nanoTime();
                for (int i = 0; i < calls; i++) {
                    long s = System.nanoTime();
                    call.run();
                    lat[i] = System.nanoTime() - s;
                }
            }
            return json(step, op, calls, stats(lat, calls), (System.nanoTime() - t0) / 1e9);
        }
    }

    static String concurrent(String step, String op, int clients, double seconds, int warmup) throws Exception {
        CountDownLatch ready = new CountDownLatch(clients);
        CountDownLatch go = new CountDownLatch(1);
        long[] window = new long[2];
        long[][] lat = new long[clients][];
        int[] counts = new int[clients];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int k = 0; k < clients; k++) {
            final int me = k;
            Thread th = new Thread(() -> {
                Conn c = null;
                try {
                    c = new Conn();
                    Call call = readCall(op, c);
                    if (call == null) throw new IllegalArgumentException("not a read op: " + op);
                    for (int i = 0; i < warmup; i++) call.run();
                    ready.countDown();
                    go.await();
                    long start = window[0], end = window[1];
                    long wait = start - System.nanoTime();
                    if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    long[] mine = new long[1024];
                    int n = 0;
                    long now = System.nanoTime();
                    while (true) {
                        call.run();
                        long t1 = System.nanoTime();
                        if (t1 > end) break;
                        if (n == mine.length) mine = Arrays.copyOf(mine, n * 2);
                        mine[n++] = t1 - now;
                        now = t1;
                    }
                    lat[me] = mine;
                    counts[me] = n;
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                    ready.countDown();
                } finally {
                    if (c != null) c.close();
                }
            }, "load-" + k);
            th.setDaemon(true);
            threads.add(th);
            th.start();
        }
        ready.await();
        if (failure.get() != null) {
            go.countDown();
            throw new RuntimeException(failure.get());
        }
        window[0] = System.nanoTime() + 300_000_000L + 5_000_000L * clients;
        window[1] = window[0] + (long) (seconds * 1e9);
        System.out.printf("{\"window\": \"%s\", \"start_ns\": %d, \"end_ns\": %d}%n", step, window[0], window[1]);
        System.out.flush();
        go.countDown();
        for (Thread th : threads) th.join();
        if (failure.get() != null) throw new RuntimeException(failure.get());
        int total = 0;
        for (int n : counts) total += n;
        long[] all = new long[total];
        int at = 0;
        for (int k = 0; k < clients; k++) {
            System.arraycopy(lat[k], 0, all, at, counts[k]);
            at += counts[k];
        }
        String out = json(step, op, total, stats(all, total), (window[1] - window[0]) / 1e9);
        int idle = 0;
        for (int n : counts) if (n == 0) idle++;
        return out.substring(0, out.length() - 1) + ", \"clients\": " + clients + ", \"idle_clients\": " + idle + "}";
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: MetastoreLoad <host> <port> <db> <table> <partitioned table> <step>...");
            System.exit(2);
        }
        host = args[0];
        port = Integer.parseInt(args[1]);
        db = args[2];
        table = args[3];
        ptable = args[4];
        for (int i = 5; i < args.length; i++) {
            String step = args[i];
            String[] p = step.split(":");
            String op = p.length > 1 ? p[1] : "";
            String line;
            try {
                if (p[0].equals("single") && p.length == 4) {
                    line = single(step, op, Integer.parseInt(p[2]), Integer.parseInt(p[3]));
                } else if (p[0].equals("concurrent") && p.length == 5) {
                    line = concurrent(step, op, Integer.parseInt(p[2]), Double.parseDouble(p[3]), Integer.parseInt(p[4]));
                } else {
                    System.err.println("not a step: " + step);
                    System.exit(2);
                    return;
                }
            } catch (Throwable e) {
                line = error(step, op, e);
            }
            System.out.println(line);
            System.out.flush();
        }
    }
}
