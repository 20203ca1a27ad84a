/*
 * hivemesh: a Spark DataSource V2 reading the insert events of Hive full-ACID ORC files.
 *
 * Why it exists: Spark's own ORC readers fail on an ACID file as soon as Spark prunes one of the
 * six ACID columns (ORC's SchemaEvolution then wraps the pruned schema in the ACID event schema
 * again). This source hands ORC an ACID-shaped reader schema (all six top-level names, `row`
 * pruned to the fields used) and includes only the columns Spark asked for, so the ACID columns
 * are decoded only when used, and zero-column reads work. Rows are decoded by Spark's own
 * OrcColumnarBatchReader (the same vectors as spark.read.orc).
 *
 * Options (all required unless said):
 *   files   one line per file: "<partition index>\t<readable length or -1>\t<size>\t<path URI>";
 *           the length cuts a streaming file at its last flushed footer (_flush_length); the size
 *           (bytes, as listed) sizes the splits, which are packed into tasks as Spark's file
 *           sources pack theirs (spark.sql.files.maxPartitionBytes, openCostInBytes).
 *   splitBytes  most bytes per task (default spark.sql.files.maxPartitionBytes); a larger file is
 *           split into byte ranges, a stripe belonging to the range its first byte falls in.
 *           Files cut at a length are read in one split.
 *   batchRows  rows per columnar batch (default spark.sql.orc.columnarReaderBatchSize).
 *   events  "insert" (default: base/delta files, checked for ACID v1 delete events) or "delete"
 *           (delete_delta files, read as they are).
 * Schema (user-given): the six ACID columns, `row`, then one int column (any name) holding each
 * file's partition index, filled like a partition column (no bytes read).
 *
 * count(*) without a filter is answered from ORC footers (the files' row counts). A data file
 * whose hive.acid.stats reports delete events (Hive ACID v1, before split-update) is refused with
 * an IOException naming it: its delete events would need the v1 merge semantics, which hivemesh
 * does not implement.
 */
package io.hivemesh.spark;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.lib.input.FileSplit;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.orc.OrcConf;
import org.apache.orc.OrcFile;
import org.apache.orc.Reader;
import org.apache.orc.TypeDescription;
import org.apache.spark.memory.MemoryMode;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.execution.datasources.orc.OrcColumnarBatchReader;
import org.apache.spark.sql.execution.datasources.orc.OrcUtils;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.SerializableConfiguration;

public final class AcidOrcSource implements TableProvider {
  static final String[] ACID_COLUMNS = {
    "operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row"};
  static final int ROW = 5;
  static final String STATS_KEY = "hive.acid.stats";

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw new IllegalArgumentException(
        "hivemesh-acid-orc needs a schema: the six ACID columns, row, and the partition index");
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> options) {
    return new AcidTable(schema, new CaseInsensitiveStringMap(options));
  }

  /** One file to read. */
  static final class FileEntry implements Serializable {
    final int partitionIndex;
    final long length; // readable length, -1 for the whole file
    final long size; // bytes, as listed
    final String path;

    FileEntry(int partitionIndex, long length, long size, String path) {
      this.partitionIndex = partitionIndex;
      this.length = length;
      this.size = size;
      this.path = path;
    }
  }

  static List<FileEntry> parseFiles(String text) {
    List<FileEntry> out = new ArrayList<>();
    if (text == null) {
      throw new IllegalArgumentException("hivemesh-acid-orc: option 'files' is required");
    }
    for (String line : text.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      String[] parts = line.split("\t", 4);
      if (parts.length != 4) {
        throw new IllegalArgumentException(
            "hivemesh-acid-orc: a 'files' line must be '<index>\\t<length>\\t<size>\\t<path>': "
                + line);
      }
      out.add(
          new FileEntry(
              Integer.parseInt(parts[0]),
              Long.parseLong(parts[1]),
              Long.parseLong(parts[2]),
              parts[3]));
    }
    return out;
  }

  static final class AcidTable implements Table, SupportsRead {
    private final StructType schema;
    private final CaseInsensitiveStringMap options;

    AcidTable(StructType schema, CaseInsensitiveStringMap options) {
      if (schema.fields().length != ACID_COLUMNS.length + 1) {
        throw new IllegalArgumentException(
            "hivemesh-acid-orc: the schema must be the six ACID columns and a partition index: "
                + schema.simpleString());
      }
      for (int i = 0; i < ACID_COLUMNS.length; i++) {
        if (!schema.fields()[i].name().equals(ACID_COLUMNS[i])) {
          throw new IllegalArgumentException(
              "hivemesh-acid-orc: column " + i + " must be " + ACID_COLUMNS[i] + ", not "
                  + schema.fields()[i].name());
        }
      }
      this.schema = schema;
      this.options = options;
    }

    @Override
    public String name() {
      return "hivemesh-acid-orc";
    }

    @Override
    @SuppressWarnings("deprecation") // Table.columns() derives from it
    public StructType schema() {
      return schema;
    }

    @Override
    public java.util.Set<TableCapability> capabilities() {
      return java.util.EnumSet.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
      return new AcidScanBuilder(schema, options);
    }
  }

  static final class AcidScanBuilder
      implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownAggregates {
    private final StructType schema;
    private final CaseInsensitiveStringMap options;
    private StructType required;
    private boolean countOnly;

    AcidScanBuilder(StructType schema, CaseInsensitiveStringMap options) {
      this.schema = schema;
      this.options = options;
      this.required = schema;
    }

    @Override
    public void pruneColumns(StructType requiredSchema) {
      this.required = requiredSchema;
    }

    @Override
    public boolean pushAggregation(Aggregation aggregation) {
      if (aggregation.groupByExpressions().length != 0) {
        return false;
      }
      for (AggregateFunc f : aggregation.aggregateExpressions()) {
        if (!(f instanceof CountStar)) {
          return false;
        }
      }
      countOnly = aggregation.aggregateExpressions().length > 0;
      return countOnly;
    }

    @Override
    public Scan build() {
      return new AcidScan(schema, required, options, countOnly);
    }
  }

  static final class AcidScan implements Scan, Batch {
    private final StructType schema;
    private final StructType required;
    private final CaseInsensitiveStringMap options;
    private final boolean countOnly;

    AcidScan(StructType schema, StructType required, CaseInsensitiveStringMap options, boolean countOnly) {
      this.schema = schema;
      this.required = required;
      this.options = options;
      this.countOnly = countOnly;
    }

    @Override
    public StructType readSchema() {
      if (countOnly) {
        return new StructType().add("count(*)", DataTypes.LongType, false);
      }
      return required;
    }

    @Override
    public String description() {
      return "hivemesh-acid-orc" + (countOnly ? " [count(*) from footers]" : " " + required.simpleString());
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      SQLConf sql = SQLConf.get();
      long maxBytes =
          options.containsKey("splitBytes")
              ? options.getLong("splitBytes", 0)
              : sql.filesMaxPartitionBytes();
      long openCost = sql.filesOpenCostInBytes();
      int parallelism =
          org.apache.spark.sql.classic.SparkSession.active().sparkContext().defaultParallelism();
      List<FileEntry> files = parseFiles(options.get("files"));
      // As Spark's file sources: splits of at most maxBytes, packed into partitions of about
      // that size (each file costing openCost more), smaller when the data is small for the cores.
      long total = 0;
      for (FileEntry f : files) {
        total += readable(f) + openCost;
      }
      long target =
          Math.max(1, Math.min(maxBytes, Math.max(openCost, total / Math.max(parallelism, 1))));
      List<AcidSplit> splits = new ArrayList<>();
      for (FileEntry f : files) {
        long size = readable(f);
        if (countOnly || f.length >= 0 || size <= target) {
          splits.add(new AcidSplit(f, 0, f.length >= 0 ? f.length : Long.MAX_VALUE, size));
          continue;
        }
        for (long start = 0; start < size; start += target) {
          long len = Math.min(target, size - start);
          splits.add(new AcidSplit(f, start, len, len));
        }
      }
      splits.sort((a, b) -> Long.compare(b.bytes, a.bytes));
      List<InputPartition> out = new ArrayList<>();
      List<AcidSplit> current = new ArrayList<>();
      long currentBytes = 0;
      for (AcidSplit split : splits) {
        if (!current.isEmpty() && currentBytes + split.bytes > target) {
          out.add(new AcidPartition(current.toArray(new AcidSplit[0])));
          current = new ArrayList<>();
          currentBytes = 0;
        }
        current.add(split);
        currentBytes += split.bytes + openCost;
      }
      if (!current.isEmpty()) {
        out.add(new AcidPartition(current.toArray(new AcidSplit[0])));
      }
      return out.toArray(new InputPartition[0]);
    }

    private static long readable(FileEntry f) {
      return f.length >= 0 ? f.length : f.size;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      Configuration conf = hadoopConf();
      return new AcidReaderFactory(
          new SerializableConfiguration(conf),
          schema,
          required,
          countOnly,
          options.containsKey("batchRows")
              ? options.getInt("batchRows", 0)
              : SQLConf.get().orcVectorizedReaderBatchSize(),
          !"delete".equals(options.getOrDefault("events", "insert")));
    }
  }

  /** A byte range of one file (whole file: start 0, length Long.MAX_VALUE or its cut length). */
  static final class AcidSplit implements Serializable {
    final FileEntry file;
    final long start;
    final long length;
    final long bytes; // its share of the file's bytes, for packing

    AcidSplit(FileEntry file, long start, long length, long bytes) {
      this.file = file;
      this.start = start;
      this.length = length;
      this.bytes = bytes;
    }
  }

  /** The splits one task reads, one after the other. */
  static final class AcidPartition implements InputPartition {
    final AcidSplit[] splits;

    AcidPartition(AcidSplit[] splits) {
      this.splits = splits;
    }
  }

  static final class AcidReaderFactory implements PartitionReaderFactory {
    private final SerializableConfiguration conf;
    private final StructType schema;
    private final StructType required;
    private final boolean countOnly;
    private final int batchRows;
    private final boolean insertEvents;

    AcidReaderFactory(
        SerializableConfiguration conf,
        StructType schema,
        StructType required,
        boolean countOnly,
        int batchRows,
        boolean insertEvents) {
      this.conf = conf;
      this.schema = schema;
      this.required = required;
      this.countOnly = countOnly;
      this.batchRows = batchRows;
      this.insertEvents = insertEvents;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return !countOnly;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      if (!countOnly) {
        throw new UnsupportedOperationException("hivemesh-acid-orc reads rows as columnar batches");
      }
      return new CountReader(conf.value(), ((AcidPartition) partition).splits, insertEvents);
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      AcidSplit[] splits = ((AcidPartition) partition).splits;
      Configuration c = conf.value();
      return new PartitionReader<ColumnarBatch>() {
        private int next;
        private BatchReader current;

        @Override
        public boolean next() throws IOException {
          while (true) {
            if (current != null && current.next()) {
              return true;
            }
            if (current != null) {
              current.close();
              current = null;
            }
            if (next >= splits.length) {
              return false;
            }
            current = new BatchReader(c, schema, required, splits[next++], batchRows, insertEvents);
          }
        }

        @Override
        public ColumnarBatch get() {
          return current.get();
        }

        @Override
        public void close() throws IOException {
          if (current != null) {
            current.close();
            current = null;
          }
        }
      };
    }
  }

  /** The session's Hadoop configuration (its spark.hadoop.* settings, as Spark's file sources). */
  static Configuration hadoopConf() {
    return org.apache.spark.sql.classic.SparkSession.active().sessionState().newHadoopConf();
  }

  static Reader openOrc(Configuration conf, FileEntry f) throws IOException {
    Path p = new Path(f.path);
    OrcFile.ReaderOptions ro = OrcFile.readerOptions(conf).filesystem(p.getFileSystem(conf));
    if (f.length >= 0) {
      ro = ro.maxLength(f.length);
    }
    return OrcFile.createReader(p, ro);
  }

  /** Delete events in a data file, from hive.acid.stats ("inserts,updates,deletes"); 0 if absent. */
  static long deleteEvents(Reader reader) {
    if (!reader.hasMetadataValue(STATS_KEY)) {
      return 0;
    }
    ByteBuffer buf = reader.getMetadataValue(STATS_KEY).duplicate();
    String text = StandardCharsets.UTF_8.decode(buf).toString().trim();
    String[] parts = text.split(",");
    return parts.length == 3 ? Long.parseLong(parts[2].trim()) : 0;
  }

  static IOException v1Deletes(String path, long deletes) {
    return new IOException(
        "hivemesh-acid-orc: " + path + " is an ACID data file holding " + deletes
            + " delete events (Hive ACID v1 layout, before split-update); hivemesh reads ACID v2 "
            + "tables: major-compact the table in Hive first");
  }

  /** One row: the number of events of a partition's files, from their footers. */
  static final class CountReader implements PartitionReader<InternalRow> {
    private final long count;
    private boolean done;

    CountReader(Configuration conf, AcidSplit[] splits, boolean insertEvents) {
      long sum = 0;
      for (AcidSplit split : splits) {
        FileEntry f = split.file;
        try (Reader reader = openOrc(conf, f)) {
          long deletes = insertEvents ? deleteEvents(reader) : 0;
          if (deletes > 0) {
            throw v1Deletes(f.path, deletes);
          }
          sum += reader.getNumberOfRows();
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      }
      this.count = sum;
    }

    @Override
    public boolean next() {
      if (done) {
        return false;
      }
      done = true;
      return true;
    }

    @Override
    public InternalRow get() {
      return new GenericInternalRow(new Object[] {count});
    }

    @Override
    public void close() {}
  }

  /** Columnar batches of one split, through Spark's OrcColumnarBatchReader. */
  static final class BatchReader implements PartitionReader<ColumnarBatch> {
    private final OrcColumnarBatchReader reader;

    BatchReader(
        Configuration base,
        StructType schema,
        StructType required,
        AcidSplit split,
        int batchRows,
        boolean insertEvents)
        throws IOException {
      FileEntry f = split.file;
      try (Reader footer = openOrc(base, f)) {
        long deletes = insertEvents ? deleteEvents(footer) : 0;
        if (deletes > 0) {
          throw v1Deletes(f.path, deletes);
        }
        if (footer.getNumberOfRows() == 0) { // also a 0-byte file, which Hive writes for no rows
          reader = null;
          return;
        }
      }
      // ORC reader schema: all six ACID names (so ORC does not wrap it again), row pruned to the
      // fields used; only the top-level columns Spark asked for are included (decoded).
      StructType rowType = (StructType) schema.fields()[ROW].dataType();
      StructType readRow = rowType;
      List<String> include = new ArrayList<>();
      int[] dataIds = new int[required.fields().length];
      int[] partIds = new int[required.fields().length];
      String partitionColumn = schema.fields()[ACID_COLUMNS.length].name();
      for (int i = 0; i < required.fields().length; i++) {
        StructField field = required.fields()[i];
        partIds[i] = -1;
        dataIds[i] = -1;
        if (field.name().equals(partitionColumn)) {
          partIds[i] = 0;
          continue;
        }
        for (int c = 0; c < ACID_COLUMNS.length; c++) {
          if (ACID_COLUMNS[c].equals(field.name())) {
            dataIds[i] = c;
            include.add(Integer.toString(c));
            if (c == ROW) {
              readRow = (StructType) field.dataType();
            }
          }
        }
      }
      StructType orcSchema = new StructType();
      for (int c = 0; c < ACID_COLUMNS.length; c++) {
        StructField sf = schema.fields()[c];
        orcSchema = orcSchema.add(sf.name(), c == ROW ? readRow : sf.dataType(), true);
      }
      String orcSchemaText = OrcUtils.getOrcSchemaString(orcSchema);
      Configuration conf = new Configuration(base);
      OrcConf.MAPRED_INPUT_SCHEMA.setString(conf, orcSchemaText);
      OrcConf.INCLUDE_COLUMNS.setString(conf, String.join(",", include));
      OrcConf.IS_SCHEMA_EVOLUTION_CASE_SENSITIVE.setBoolean(conf, false);
      if (f.length >= 0) {
        OrcConf.MAX_FILE_LENGTH.setLong(conf, f.length);
      }
      long length = split.length == Long.MAX_VALUE ? Long.MAX_VALUE - split.start : split.length;
      FileSplit fileSplit = new FileSplit(new Path(f.path), split.start, length, new String[0]);
      OrcColumnarBatchReader r = new OrcColumnarBatchReader(batchRows, MemoryMode.ON_HEAP);
      try {
        r.initialize(fileSplit, new TaskAttemptContextImpl(conf, new TaskAttemptID()));
        r.initBatch(
            TypeDescription.fromString(orcSchemaText),
            required.fields(),
            dataIds,
            partIds,
            new GenericInternalRow(new Object[] {f.partitionIndex}));
      } catch (IOException | RuntimeException e) {
        r.close();
        throw e;
      }
      reader = r;
    }

    @Override
    public boolean next() throws IOException {
      return reader != null && reader.nextKeyValue();
    }

    @Override
    public ColumnarBatch get() {
      return reader.getCurrentValue();
    }

    @Override
    public void close() throws IOException {
      if (reader != null) {
        reader.close();
      }
    }
  }
}
