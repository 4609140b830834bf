package io.offsetpipeline.connect;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.ServiceLoader;
import java.util.stream.Stream;

import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.header.Headers;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.transforms.Filter;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.HasHeaderKey;
import org.apache.kafka.connect.transforms.predicates.Predicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The transform's invariants: a MirrorMaker 2 copy leaves it with exactly one {@code IDC} (the
 * source alias, UTF-8) and one {@code Offset} (decimal ASCII digits) header, whatever origin
 * headers it came with; anything that is not such a copy is refused, never passed on bare.
 */
class OriginHeadersTest {

    private static final byte[] KEY = "k".getBytes(StandardCharsets.UTF_8);
    private static final byte[] VALUE = "v".getBytes(StandardCharsets.UTF_8);

    /** A record as MirrorMaker 2's source task makes it (MirrorSourceTask.convertRecord). */
    private static SourceRecord mirrored(Object cluster, Object offset, Headers headers) {
        Map<String, Object> partition = new HashMap<>();
        partition.put("topic", "orders");
        partition.put("partition", 3);
        if (cluster != null) {
            partition.put("cluster", cluster);
        }
        Map<String, Object> sourceOffset = new HashMap<>();
        if (offset != null) {
            sourceOffset.put("offset", offset);
        }
        return new SourceRecord(partition, sourceOffset, "orders", 3, Schema.OPTIONAL_BYTES_SCHEMA, KEY,
                Schema.BYTES_SCHEMA, VALUE, 1_700_000_000_000L, headers);
    }

    private static OriginHeaders<SourceRecord> transform(Map<String, String> config) {
        OriginHeaders<SourceRecord> transform = new OriginHeaders<>();
        transform.configure(config);
        return transform;
    }

    private static List<Header> named(SourceRecord record, String name) {
        List<Header> found = new ArrayList<>();
        record.headers().allWithName(name).forEachRemaining(found::add);
        return found;
    }

    /** The one header of that name, as the bytes the ByteArrayConverter writes (the value itself). */
    private static byte[] onlyBytes(SourceRecord record, String name) {
        List<Header> found = named(record, name);
        assertEquals(1, found.size(), () -> name + " headers: " + found);
        Header header = found.get(0);
        assertEquals(Schema.Type.BYTES, header.schema().type());
        return (byte[]) header.value();
    }

    private static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static Stream<Arguments> copies() {
        return Stream.of(
                Arguments.of("idc1", 0L, "idc1", "0"),
                Arguments.of("idc2", 42L, "idc2", "42"),
                Arguments.of("idc1", Long.MAX_VALUE, "idc1", "9223372036854775807"),
                Arguments.of("idc1", 7, "idc1", "7"), // an Integer offset (a map read back as JSON)
                Arguments.of("dc-east.prod", 1_000_000L, "dc-east.prod", "1000000"),
                Arguments.of("centre-é", 5L, "centre-é", "5"), // non-ASCII alias: its UTF-8 bytes, verbatim
                Arguments.of(" spaced ", 9L, " spaced ", "9")); // verbatim: no trimming
    }

    @ParameterizedTest
    @MethodSource("copies")
    void writesTheAliasAsUtf8AndTheOffsetAsDecimalDigits(String cluster, Object offset, String idc, String digits) {
        SourceRecord out = transform(Map.of()).apply(mirrored(cluster, offset, new ConnectHeaders()));
        assertArrayEquals(utf8(idc), onlyBytes(out, "IDC"));
        assertArrayEquals(digits.getBytes(StandardCharsets.US_ASCII), onlyBytes(out, "Offset"));
        assertEquals(2, out.headers().size());
    }

    static Stream<Arguments> existingHeaders() {
        return Stream.of(
                // an upstream mirror's origin (a chain of mirrors): replaced, never doubled
                Arguments.of(new ConnectHeaders().addBytes("IDC", utf8("idc0")).addBytes("Offset", utf8("9"))),
                // forged or malformed origin headers, repeated, in other schemas
                Arguments.of(new ConnectHeaders().addString("IDC", "x").addString("IDC", "y").addInt("Offset", -1)),
                Arguments.of(new ConnectHeaders().addBytes("Offset", null)),
                Arguments.of(new ConnectHeaders().addBytes("IDC", new byte[] {(byte) 0xff})));
    }

    @ParameterizedTest
    @MethodSource("existingHeaders")
    void replacesOriginHeadersTheRecordCameWith(Headers existing) {
        SourceRecord in = mirrored("idc1", 11L, existing.addBytes("trace", utf8("t-1")));
        SourceRecord out = transform(Map.of()).apply(in);
        assertArrayEquals(utf8("idc1"), onlyBytes(out, "IDC"));
        assertArrayEquals(utf8("11"), onlyBytes(out, "Offset"));
        // other headers kept, in place and as they were
        assertArrayEquals(utf8("t-1"), onlyBytes(out, "trace"));
        // the input record is not changed (the worker may retry it)
        assertEquals(existing.size(), in.headers().size());
    }

    @Test
    void keepsEverythingElseOfTheRecord() {
        SourceRecord in = mirrored("idc2", 5L, new ConnectHeaders().addBytes("a", utf8("1")));
        SourceRecord out = transform(Map.of()).apply(in);
        assertEquals(in.sourcePartition(), out.sourcePartition());
        assertEquals(in.sourceOffset(), out.sourceOffset());
        assertEquals(in.topic(), out.topic());
        assertEquals(in.kafkaPartition(), out.kafkaPartition());
        assertSame(in.key(), out.key());
        assertSame(in.value(), out.value());
        assertEquals(in.keySchema(), out.keySchema());
        assertEquals(in.valueSchema(), out.valueSchema());
        assertEquals(in.timestamp(), out.timestamp());
        assertEquals("a", out.headers().iterator().next().key());
    }

    @Test
    void namesTheHeadersAsConfigured() {
        SourceRecord out = transform(Map.of("cluster.header", "origin-dc", "offset.header", "origin-offset"))
                .apply(mirrored("idc1", 3L, new ConnectHeaders().addBytes("IDC", utf8("kept")).addBytes("origin-dc", utf8("old"))));
        assertArrayEquals(utf8("idc1"), onlyBytes(out, "origin-dc"));
        assertArrayEquals(utf8("3"), onlyBytes(out, "origin-offset"));
        assertArrayEquals(utf8("kept"), onlyBytes(out, "IDC")); // not an origin header under this config
    }

    @Test
    void stringValuesComeOutAsTheSameBytesThroughTheSimpleHeaderConverter() {
        SimpleHeaderConverter converter = new SimpleHeaderConverter();
        converter.configure(Map.of());
        SourceRecord strings = transform(Map.of("value.type", "string")).apply(mirrored("idc-é", 123L, new ConnectHeaders()));
        for (Header header : strings.headers()) {
            byte[] written = converter.fromConnectHeader("orders", header.key(), header.schema(), header.value());
            assertArrayEquals(header.key().equals("IDC") ? utf8("idc-é") : utf8("123"), written);
        }
        // why value.type exists: that converter writes a byte-array header as Base64 text, not its bytes
        SourceRecord bytes = transform(Map.of()).apply(mirrored("idc1", 123L, new ConnectHeaders()));
        Header offset = bytes.headers().lastWithName("Offset");
        byte[] written = converter.fromConnectHeader("orders", "Offset", offset.schema(), offset.value());
        assertArrayEquals(utf8("MTIz"), written);
    }

    static Stream<Arguments> notMirrorCopies() {
        return Stream.of(
                Arguments.of(null, 1L, "source cluster alias"),
                Arguments.of("", 1L, "source cluster alias"),
                Arguments.of(17, 1L, "source cluster alias"),
                Arguments.of("idc1", null, "upstream offset"),
                Arguments.of("idc1", "12", "upstream offset"),
                Arguments.of("idc1", 1.5, "upstream offset"),
                Arguments.of("idc1", -1L, "negative upstream offset"));
    }

    @ParameterizedTest
    @MethodSource("notMirrorCopies")
    void refusesRecordsWithoutMirrorMakerSourceFields(Object cluster, Object offset, String message) {
        DataException error = assertThrows(DataException.class,
                () -> transform(Map.of()).apply(mirrored(cluster, offset, new ConnectHeaders())));
        assertTrue(error.getMessage().contains(message), error.getMessage());
        assertTrue(error.getMessage().contains("orders-3"), error.getMessage());
    }

    @Test
    void refusesRecordsWithoutSourcePartitionOrOffset() {
        OriginHeaders<SourceRecord> transform = transform(Map.of());
        SourceRecord noPartition = new SourceRecord(null, Map.of("offset", 1L), "orders", 0, Schema.BYTES_SCHEMA, VALUE);
        SourceRecord noOffset = new SourceRecord(Map.of("cluster", "idc1"), null, "orders", 0, Schema.BYTES_SCHEMA, VALUE);
        assertTrue(assertThrows(DataException.class, () -> transform.apply(noPartition)).getMessage().contains("no source partition"));
        assertTrue(assertThrows(DataException.class, () -> transform.apply(noOffset)).getMessage().contains("no source offset"));
        // MirrorMaker 2's heartbeats: a source partition of their own, no 'cluster'
        SourceRecord heartbeat = new SourceRecord(Map.of("sourceClusterAlias", "idc1", "targetClusterAlias", "idc2"),
                Map.of("offset", 0L), "heartbeats", 0, Schema.BYTES_SCHEMA, VALUE);
        assertTrue(assertThrows(DataException.class, () -> transform.apply(heartbeat)).getMessage().contains("heartbeat"));
    }

    @Test
    void refusesSinkRecords() {
        OriginHeaders<SinkRecord> transform = new OriginHeaders<>();
        transform.configure(Map.of());
        SinkRecord sink = new SinkRecord("orders", 0, null, null, Schema.BYTES_SCHEMA, VALUE, 4L);
        assertTrue(assertThrows(DataException.class, () -> transform.apply(sink)).getMessage().contains("not a source record"));
    }

    static Stream<Arguments> badConfigs() {
        return Stream.of(
                Arguments.of(Map.of("cluster.header", "")),
                Arguments.of(Map.of("offset.header", "")),
                Arguments.of(Map.of("cluster.header", "same", "offset.header", "same")),
                Arguments.of(Map.of("offset.header", "IDC")),
                Arguments.of(Map.of("value.type", "base64")));
    }

    @ParameterizedTest
    @MethodSource("badConfigs")
    void refusesBadConfigs(Map<String, String> config) {
        assertThrows(ConfigException.class, () -> transform(config));
    }

    @Test
    void documentsEveryConfig() {
        for (String name : List.of("cluster.header", "offset.header", "value.type", "drop.copies")) {
            assertNotNull(OriginHeaders.CONFIG_DEF.configKeys().get(name), name);
            assertTrue(OriginHeaders.CONFIG_DEF.configKeys().get(name).documentation.length() > 20, name);
        }
        assertEquals(4, OriginHeaders.CONFIG_DEF.names().size());
    }

    @Test
    void refusesUseBeforeConfigure() {
        assertThrows(IllegalStateException.class,
                () -> new OriginHeaders<SourceRecord>().apply(mirrored("idc1", 1L, new ConnectHeaders())));
    }

    @Test
    void isFoundAsAConnectPluginByServiceLoader() {
        // Connect's plugin scan (plugin.discovery=service_load) finds transformations this way.
        boolean found = ServiceLoader.load(Transformation.class).stream()
                .anyMatch(provider -> provider.type() == OriginHeaders.class);
        assertTrue(found);
    }

    /**
     * The chain the mirror configures on every flow, applied as Connect's runtime does it: a
     * transformation with a predicate runs only where the predicate holds (negate off), so
     * {@code dropCopies} (Kafka's Filter under HasHeaderKey{IDC}) drops every record that already
     * carries an origin header, and {@code origin} marks the rest.
     */
    private static SourceRecord throughMirrorChain(SourceRecord record) {
        Predicate<SourceRecord> isCopy = new HasHeaderKey<>();
        isCopy.configure(Map.of("name", "IDC"));
        Filter<SourceRecord> dropCopies = new Filter<>();
        dropCopies.configure(Map.of());
        SourceRecord kept = isCopy.test(record) ? dropCopies.apply(record) : record;
        return kept == null ? null : transform(Map.of()).apply(kept);
    }

    @Test
    void aCopyIsNeverMirroredBack() {
        // a record produced locally on idc2 is copied to idc1 with its origin ...
        SourceRecord local = mirrored("idc2", 8L, new ConnectHeaders().addBytes("trace", utf8("t")));
        SourceRecord copy = throughMirrorChain(local);
        assertNotNull(copy);
        assertArrayEquals(utf8("idc2"), onlyBytes(copy, "IDC"));
        // ... and that copy, read on idc1 by the reverse flow (its headers as bytes), is dropped there
        ConnectHeaders asRead = new ConnectHeaders();
        copy.headers().forEach(header -> asRead.addBytes(header.key(), (byte[]) header.value()));
        assertNull(throughMirrorChain(mirrored("idc1", 20L, asRead)));
        // header keys are case-sensitive: a local record's own "idc" header is not an origin
        assertNotNull(throughMirrorChain(mirrored("idc1", 21L, new ConnectHeaders().addBytes("idc", utf8("x")))));
    }

    // drop.copies: the Filter+HasHeaderKey chain above in one transform.

    private static final Map<String, String> DROPPING = Map.of("drop.copies", "true");

    static Stream<Arguments> recordsForBothChains() {
        return Stream.of(
                Arguments.of(new ConnectHeaders()),
                Arguments.of(new ConnectHeaders().addBytes("trace", utf8("t"))),
                Arguments.of(new ConnectHeaders().addBytes("IDC", utf8("idc2")).addBytes("Offset", utf8("4"))),
                Arguments.of(new ConnectHeaders().addBytes("trace", utf8("t")).addBytes("IDC", utf8("idc2"))),
                Arguments.of(new ConnectHeaders().addBytes("IDC", null)), // a key without a value is still a copy
                Arguments.of(new ConnectHeaders().addString("IDC", "forged")),
                Arguments.of(new ConnectHeaders().addBytes("Offset", utf8("9"))), // a lone Offset is replaced, not a copy
                Arguments.of(new ConnectHeaders().addBytes("idc", utf8("x")).addBytes("Offset", null)));
    }

    /** The headers as the ByteArrayConverter writes them: (key, bytes) in order. */
    private static List<String> written(SourceRecord record) {
        List<String> out = new ArrayList<>();
        record.headers().forEach(header -> out.add(header.key() + "=" + (header.value() instanceof byte[] bytes
                ? new String(bytes, StandardCharsets.UTF_8) : String.valueOf(header.value()))));
        return out;
    }

    @ParameterizedTest
    @MethodSource("recordsForBothChains")
    void dropCopiesDoesWhatFilterUnderHasHeaderKeyDoesInFront(Headers headers) {
        SourceRecord chained = throughMirrorChain(mirrored("idc1", 30L, headers.duplicate()));
        SourceRecord single = transform(DROPPING).apply(mirrored("idc1", 30L, headers.duplicate()));
        assertEquals(chained == null, single == null, () -> "dropped by one and not the other: " + headers);
        if (single != null) {
            assertEquals(written(chained), written(single));
            assertArrayEquals(utf8("idc1"), onlyBytes(single, "IDC"));
            assertArrayEquals(utf8("30"), onlyBytes(single, "Offset"));
        }
    }

    @Test
    void dropCopiesDropsACopyBeforeLookingAtAnythingElse() {
        OriginHeaders<SourceRecord> transform = transform(DROPPING);
        // as the Filter would: a copy is dropped even without MirrorMaker 2's source fields ...
        assertNull(transform.apply(mirrored(null, null, new ConnectHeaders().addBytes("IDC", utf8("idc2")))));
        // ... while a record that is no copy and no MirrorMaker 2 copy is still refused
        assertThrows(DataException.class, () -> transform.apply(mirrored(null, 1L, new ConnectHeaders())));
        // the header it looks for is the configured cluster header
        OriginHeaders<SourceRecord> renamed = transform(Map.of("drop.copies", "true", "cluster.header", "origin-dc"));
        assertNull(renamed.apply(mirrored("idc1", 1L, new ConnectHeaders().addBytes("origin-dc", utf8("idc2")))));
        assertNotNull(renamed.apply(mirrored("idc1", 1L, new ConnectHeaders().addBytes("IDC", utf8("idc2")))));
        // off by default: the copy is marked again (the chain's Filter is then what drops it)
        assertNotNull(transform(Map.of()).apply(mirrored("idc1", 1L, new ConnectHeaders().addBytes("IDC", utf8("x")))));
    }

    @Test
    void theAliasFollowsEachRecordThroughOneInstance() {
        // the alias's header is made once and reused: a record from another alias must not get it
        OriginHeaders<SourceRecord> transform = transform(Map.of());
        for (String alias : List.of("idc1", "idc1", "idc2", "idc1", "centre-é", "idc2")) {
            SourceRecord out = transform.apply(mirrored(alias, 1L, new ConnectHeaders()));
            assertArrayEquals(utf8(alias), onlyBytes(out, "IDC"), alias);
        }
        OriginHeaders<SourceRecord> strings = transform(Map.of("value.type", "string"));
        for (String alias : List.of("idc1", "idc2", "idc1")) {
            Header idc = strings.apply(mirrored(alias, 1L, new ConnectHeaders())).headers().lastWithName("IDC");
            assertEquals(Schema.Type.STRING, idc.schema().type());
            assertEquals(alias, idc.value());
        }
    }

    @Test
    void theRecordHandedInKeepsItsHeaders() {
        Headers original = new ConnectHeaders().addBytes("IDC", utf8("idc0")).addBytes("trace", utf8("t"));
        List<String> before = new ArrayList<>();
        original.forEach(header -> before.add(header.key()));
        SourceRecord in = mirrored("idc1", 2L, original);
        SourceRecord out = transform(Map.of()).apply(in);
        List<String> after = new ArrayList<>();
        in.headers().forEach(header -> after.add(header.key()));
        assertEquals(before, after);
        assertArrayEquals(utf8("idc0"), (byte[]) in.headers().lastWithName("IDC").value());
        assertTrue(in.headers() != out.headers());
    }

    static Stream<Arguments> offsets() {
        return Stream.of(0L, 1L, 9L, 10L, 11L, 99L, 100L, 999_999L, 1_000_000L, 4_294_967_296L,
                999_999_999_999_999_999L, 1_000_000_000_000_000_000L, Long.MAX_VALUE - 1, Long.MAX_VALUE)
                .map(Arguments::of);
    }

    @ParameterizedTest
    @MethodSource("offsets")
    void offsetDigitsAreLongToStringsAsciiBytes(long offset) {
        assertArrayEquals(Long.toString(offset).getBytes(StandardCharsets.US_ASCII), OriginHeaders.decimalAscii(offset));
    }

    @Test
    void offsetDigitsAgreeWithLongToStringOnRandomOffsets() {
        Random random = new Random(20261127L);
        for (int i = 0; i < 100_000; i++) {
            // every magnitude equally often, not only the 19-digit numbers most random longs are
            long offset = (random.nextLong() & Long.MAX_VALUE) >>> random.nextInt(63);
            assertArrayEquals(Long.toString(offset).getBytes(StandardCharsets.US_ASCII), OriginHeaders.decimalAscii(offset),
                    Long.toString(offset));
        }
    }
}
