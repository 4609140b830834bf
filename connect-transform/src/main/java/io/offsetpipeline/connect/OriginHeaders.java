package io.offsetpipeline.connect;

import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.components.Versioned;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.transforms.Transformation;

/**
 * Writes the origin headers on every record MirrorMaker 2 copies: the source cluster's alias
 * ({@code IDC} by default) and the record's offset on that cluster ({@code Offset} by default).
 *
 * <p>The offset sync commits a standby group's offsets only from records that say where they came
 * from: a copy's {@code IDC} names the cluster it was copied from, verbatim, as UTF-8 bytes, and its
 * {@code Offset} is the upstream offset as plain decimal ASCII digits (no sign, no padding). Those
 * are exactly the bytes this transform produces, and the only shape the sync's header parser accepts
 * as an anchor.
 *
 * <p>Where the facts come from: MirrorMaker 2's source task hands every copy over as a
 * {@link SourceRecord} whose source partition holds the source cluster's alias under
 * {@code cluster} (besides {@code topic} and {@code partition}) and whose source offset holds the
 * upstream offset under {@code offset}. Nothing else in the record says where it came from, so a
 * record without them (another connector's, MirrorMaker 2's heartbeats or checkpoints) is refused
 * with a {@link DataException}: a copy without origin headers would look like a record produced
 * locally, and the sync would take it for one. Run the transform on the flows'
 * MirrorSourceConnector only; in dedicated mode, where a flow's settings reach all of its
 * connectors, turn off heartbeats and checkpoints on flows that use it.
 *
 * <p>Invariants (tested): every record that passes carries exactly one header of each name, with
 * the values above; origin headers that came with the record (from an upstream mirror, or forged)
 * are removed first, so a copy never carries two origins; the record is otherwise unchanged, and
 * the record handed in is never changed (the worker keeps it to commit its source offset).
 *
 * <p>Dropping copies ({@code drop.copies=true}): a record that already carries a header named like
 * the cluster header, whatever its value, is dropped (the transform returns {@code null}) before
 * anything else is looked at. That is exactly what Kafka's {@code Filter} under a
 * {@code HasHeaderKey} predicate on the cluster header does in front of this transform: two flows
 * over same-named topics never copy a copy back. One transform instead of two saves the worker a
 * stage per record (its error handling, class-loader swap and predicate); the result is the same.
 *
 * <p>Cost per record (the transform runs on every copy): the alias's header is made once per alias
 * and shared by the copies (a header and its bytes are never changed once made); the offset's
 * digits are written straight into their byte array; the headers kept are carried over into one
 * new header list, not copied and then searched twice for the names to remove.
 *
 * <p>How the bytes reach the log depends on the worker's header converter, which the transform
 * cannot see. {@code value.type=bytes} (the default) adds byte-array headers: the
 * {@code ByteArrayConverter} writes them as they are. MirrorMaker 2 in dedicated mode uses that
 * converter unless told otherwise, and on a Connect cluster a MirrorSourceConnector should set
 * {@code header.converter=org.apache.kafka.connect.converters.ByteArrayConverter} too (the
 * upstream headers it copies are byte arrays as well). Connect's default
 * {@code SimpleHeaderConverter} would write a byte-array header as Base64 text, so for a worker
 * that keeps it, set {@code value.type=string}: string headers, which it writes as their UTF-8
 * bytes. A string header under the {@code ByteArrayConverter} fails the record loudly, never
 * silently.
 */
public class OriginHeaders<R extends ConnectRecord<R>> implements Transformation<R>, Versioned {

    public static final String VERSION = "0.1.0";

    public static final String CLUSTER_HEADER_CONFIG = "cluster.header";
    public static final String OFFSET_HEADER_CONFIG = "offset.header";
    public static final String VALUE_TYPE_CONFIG = "value.type";
    public static final String DROP_COPIES_CONFIG = "drop.copies";

    public static final String DEFAULT_CLUSTER_HEADER = "IDC";
    public static final String DEFAULT_OFFSET_HEADER = "Offset";
    public static final String VALUE_TYPE_BYTES = "bytes";
    public static final String VALUE_TYPE_STRING = "string";

    /** The keys of MirrorMaker 2's source partition and source offset maps this transform reads. */
    public static final String SOURCE_CLUSTER_KEY = "cluster";
    public static final String SOURCE_OFFSET_KEY = "offset";

    public static final String OVERVIEW_DOC = "Adds the origin headers of a MirrorMaker 2 copy: the source "
            + "cluster's alias and the record's offset on that cluster, replacing any origin headers the record "
            + "already had. Fails a record that is not a MirrorMaker 2 copy.";

    public static final ConfigDef CONFIG_DEF = new ConfigDef()
            .define(CLUSTER_HEADER_CONFIG, ConfigDef.Type.STRING, DEFAULT_CLUSTER_HEADER,
                    new ConfigDef.NonEmptyString(), ConfigDef.Importance.MEDIUM,
                    "Name of the header that gets the source cluster's alias (MirrorMaker 2's source partition "
                            + "field 'cluster'), written as its UTF-8 bytes.")
            .define(OFFSET_HEADER_CONFIG, ConfigDef.Type.STRING, DEFAULT_OFFSET_HEADER,
                    new ConfigDef.NonEmptyString(), ConfigDef.Importance.MEDIUM,
                    "Name of the header that gets the record's offset on the source cluster (MirrorMaker 2's "
                            + "source offset field 'offset'), written as plain decimal ASCII digits.")
            .define(VALUE_TYPE_CONFIG, ConfigDef.Type.STRING, VALUE_TYPE_BYTES,
                    ConfigDef.ValidString.in(VALUE_TYPE_BYTES, VALUE_TYPE_STRING), ConfigDef.Importance.LOW,
                    "How the header values are handed to the worker's header converter: 'bytes' for the "
                            + "ByteArrayConverter (MirrorMaker 2's default in dedicated mode), 'string' for the "
                            + "SimpleHeaderConverter or StringConverter. Either way the bytes written are the same.")
            .define(DROP_COPIES_CONFIG, ConfigDef.Type.BOOLEAN, false, ConfigDef.Importance.MEDIUM,
                    "Drop a record that already carries a header named like the cluster header (a copy made by "
                            + "a mirror), whatever its value, instead of marking it: what Kafka's Filter under a "
                            + "HasHeaderKey predicate on that header does in front of this transform, in one step. "
                            + "Turn it on for two-way mirroring, so a copy is never mirrored back.");

    private String clusterHeader;
    private String offsetHeader;
    private boolean asStrings;
    private boolean dropCopies;
    /**
     * The cluster header of the last alias seen. A task copies from one source cluster, so every
     * record brings the same alias; one immutable object, so a reader never sees half of an update.
     */
    private ClusterHeader lastCluster;

    private record ClusterHeader(String alias, Header header) {
    }

    @Override
    public void configure(Map<String, ?> configs) {
        AbstractConfig config = new AbstractConfig(CONFIG_DEF, configs);
        String cluster = config.getString(CLUSTER_HEADER_CONFIG);
        String offset = config.getString(OFFSET_HEADER_CONFIG);
        if (cluster.equals(offset)) {
            throw new ConfigException(OFFSET_HEADER_CONFIG, offset,
                    "the offset header must have another name than the cluster header ('" + cluster + "')");
        }
        clusterHeader = cluster;
        offsetHeader = offset;
        asStrings = VALUE_TYPE_STRING.equals(config.getString(VALUE_TYPE_CONFIG));
        dropCopies = config.getBoolean(DROP_COPIES_CONFIG);
        lastCluster = null;
    }

    @Override
    public R apply(R record) {
        if (clusterHeader == null) {
            throw new IllegalStateException("OriginHeaders used before configure()");
        }
        if (dropCopies && record.headers().lastWithName(clusterHeader) != null) {
            return null;
        }
        if (!(record instanceof SourceRecord)) {
            throw new DataException("OriginHeaders: " + describe(record) + " is not a source record ("
                    + record.getClass().getName() + "); it only transforms MirrorMaker 2's copies");
        }
        SourceRecord source = (SourceRecord) record;
        Header cluster = clusterHeaderFor(sourceCluster(source));
        long offset = sourceOffset(source);

        // A new list: the record handed in keeps its own headers.
        ConnectHeaders headers = new ConnectHeaders();
        for (Header header : record.headers()) {
            String key = header.key();
            if (!key.equals(clusterHeader) && !key.equals(offsetHeader)) {
                headers.add(header);
            }
        }
        headers.add(cluster);
        if (asStrings) {
            headers.addString(offsetHeader, Long.toString(offset));
        } else {
            headers.addBytes(offsetHeader, decimalAscii(offset));
        }
        return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(), record.key(),
                record.valueSchema(), record.value(), record.timestamp(), headers);
    }

    private Header clusterHeaderFor(String alias) {
        ClusterHeader last = lastCluster;
        if (last == null || !last.alias().equals(alias)) {
            ConnectHeaders made = new ConnectHeaders();
            if (asStrings) {
                made.addString(clusterHeader, alias);
            } else {
                made.addBytes(clusterHeader, alias.getBytes(StandardCharsets.UTF_8));
            }
            last = new ClusterHeader(alias, made.lastWithName(clusterHeader));
            lastCluster = last;
        }
        return last.header();
    }

    /** {@code value} (not negative) as plain decimal ASCII digits: no sign, no padding. */
    static byte[] decimalAscii(long value) {
        int length = 1;
        for (long rest = value / 10; rest != 0; rest /= 10) {
            length++;
        }
        byte[] digits = new byte[length];
        long rest = value;
        for (int i = length - 1; i >= 0; i--) {
            digits[i] = (byte) ('0' + (int) (rest % 10));
            rest /= 10;
        }
        return digits;
    }

    private static String sourceCluster(SourceRecord record) {
        Map<String, ?> partition = record.sourcePartition();
        if (partition == null) {
            throw new DataException("OriginHeaders: " + describe(record)
                    + " has no source partition; it needs MirrorMaker 2's {cluster, topic, partition}");
        }
        Object cluster = partition.get(SOURCE_CLUSTER_KEY);
        if (!(cluster instanceof String) || ((String) cluster).isEmpty()) {
            throw new DataException("OriginHeaders: " + describe(record) + " has no source cluster alias: its source "
                    + "partition's '" + SOURCE_CLUSTER_KEY + "' is " + shown(cluster) + " in " + partition
                    + " (is this a MirrorMaker 2 heartbeat or checkpoint? run the transform on the source connector only)");
        }
        return (String) cluster;
    }

    private static long sourceOffset(SourceRecord record) {
        Map<String, ?> offsets = record.sourceOffset();
        if (offsets == null) {
            throw new DataException("OriginHeaders: " + describe(record)
                    + " has no source offset; it needs MirrorMaker 2's {offset}");
        }
        Object offset = offsets.get(SOURCE_OFFSET_KEY);
        // Integral types only: a fraction or text is not an offset, and no conversion is guessed.
        if (!(offset instanceof Long || offset instanceof Integer || offset instanceof Short || offset instanceof Byte)) {
            throw new DataException("OriginHeaders: " + describe(record) + " has no upstream offset: its source "
                    + "offset's '" + SOURCE_OFFSET_KEY + "' is " + shown(offset) + " in " + offsets);
        }
        long value = ((Number) offset).longValue();
        if (value < 0) {
            throw new DataException("OriginHeaders: " + describe(record) + " has a negative upstream offset " + value);
        }
        return value;
    }

    private static String describe(ConnectRecord<?> record) {
        return "the record for " + record.topic() + "-" + record.kafkaPartition();
    }

    private static String shown(Object value) {
        return value == null ? "missing" : value.getClass().getSimpleName() + " '" + value + "'";
    }

    @Override
    public ConfigDef config() {
        return CONFIG_DEF;
    }

    @Override
    public String version() {
        return VERSION;
    }

    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return "OriginHeaders{" + clusterHeader + ", " + offsetHeader + (asStrings ? ", strings" : ", bytes")
                + (dropCopies ? ", drops copies" : "") + "}";
    }
}
