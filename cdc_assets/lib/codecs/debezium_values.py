"""Debezium / Kafka Connect column values -> the change log's canonical text and MySQL type names.

A value arrives as a Spark VARIANT (the JSON value exactly as written: decimals keep every
digit, strings stay apart from numbers) plus, when the message carries a schema, its
Connect field schema `FIELD` (type, logical name, parameters, TiCDC's `tidb_type`).
Semantic types (debezium.io MySQL connector "data type mappings"):

- io.debezium.time.Date (days) -> `YYYY-MM-DD`; Timestamp / MicroTimestamp /
  NanoTimestamp (epoch ms / us / ns of the wall clock read as UTC) -> datetime text;
  ZonedTimestamp (ISO-8601 instant) -> UTC text; Time / MicroTime / NanoTime -> TIME
  text (may be negative or above 24 h). Fractions: 6 digits, left out when zero.
- org.apache.kafka.connect.data.Decimal: base64 of the big-endian two's-complement
  unscaled value + `scale` parameter (or a plain JSON number: Flink CDC's numeric
  format); VariableScaleDecimal: {scale, value}. Exact up to 38 digits.
- io.debezium.data.Bits: base64 of little-endian bytes -> the unsigned integer.
- Connect `bytes`, and TiCDC strings whose `tidb_type` is binary/blob: base64 ->
  canonical base64 of the same bytes. JSON booleans -> `1` / `0`.
- TiCDC writes BIGINT UNSIGNED as a wrapped int64 (2^64-1 arrives as -1): with
  `tidb_type` (or a propagated source type) "bigint unsigned" a negative value gets 2^64
  added. Without either nothing says the column is unsigned: the wrapped value is kept.

Column types: `tidb_type` (TiCDC extension) > the propagated source type parameter
(`column.propagate.source.type`) > the logical name > the Connect type. Without a
schema, from the JSON kind of the value (number -> decimal, string/null -> varchar).
"""

from __future__ import annotations

from pyspark.sql import Column, functions as F, types as T

FIELD = T.StructType(
    [
        T.StructField("field", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("name", T.StringType()),
        T.StructField("tidb_type", T.StringType()),
        T.StructField("parameters", T.MapType(T.StringType(), T.StringType())),
    ]
)
#: `schema.fields` of an envelope: before / after carry the row's field schemas.
ENVELOPE_FIELDS = T.ArrayType(
    T.StructType([T.StructField("field", T.StringType()), T.StructField("fields", T.ArrayType(FIELD))])
)

_TIME = "io.debezium.time."
DATE, TIMESTAMP, MICRO_TIMESTAMP, NANO_TIMESTAMP, ZONED_TIMESTAMP = (
    _TIME + n for n in ("Date", "Timestamp", "MicroTimestamp", "NanoTimestamp", "ZonedTimestamp")
)
TIME, MICRO_TIME, NANO_TIME, YEAR = (_TIME + n for n in ("Time", "MicroTime", "NanoTime", "Year"))
CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
BITS, JSON, ENUM, ENUM_SET = (f"io.debezium.data.{n}" for n in ("Bits", "Json", "Enum", "EnumSet"))
SOURCE_TYPE, SOURCE_LENGTH, SOURCE_SCALE = (
    f"__debezium.source.column.{n}" for n in ("type", "length", "scale")
)

_NAMED_TYPES = {
    DATE: "date", TIMESTAMP: "datetime", MICRO_TIMESTAMP: "datetime", NANO_TIMESTAMP: "datetime",
    ZONED_TIMESTAMP: "timestamp", TIME: "time", MICRO_TIME: "time", NANO_TIME: "time", YEAR: "year",
    BITS: "bit", JSON: "json", ENUM: "enum", ENUM_SET: "set", VARIABLE_SCALE_DECIMAL: "decimal",
    "io.debezium.data.geometry.Geometry": "geometry", "io.debezium.data.geometry.Point": "geometry",
    "io.debezium.data.TiDBVectorFloat32": "vector",
}
_CONNECT_TYPES = {
    "int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint",
    "float": "float", "float32": "float", "double": "double", "float64": "double",
    "boolean": "boolean", "string": "varchar", "bytes": "varbinary",
    "struct": "json", "array": "json", "map": "json",
}
_BINARY_TYPE = r"^\s*((var)?binary|(tiny|medium|long)?blob)\b"
_US_PER_DAY = 86_400_000_000
# 0001-01-01 .. 9999-12-31 23:59:59.999999 in epoch microseconds; TIME within +-10^15 us.
_MIN_DATETIME_US, _MAX_DATETIME_US = -62_135_596_800_000_000, 253_402_300_799_999_999
_MAX_TIME_US = 10**15
_TWO_POW_64 = 18446744073709551616


def _floor_div(c: Column, n: int) -> Column:
    """Exact floor division of a long (decimal arithmetic: no double rounding)."""
    return F.floor(c.cast("decimal(20,0)") / F.lit(n).cast("decimal(20,0)")).cast("long")


def _two_digits(c: Column) -> Column:
    """At least two digits: lpad alone would cut TIME's 838 hours down to "83"."""
    text = c.cast("string")
    return F.lpad(text, F.greatest(F.length(text), F.lit(2)), "0")


def _clock_text(us: Column) -> Column:
    """Non-negative microseconds -> `HH:MM:SS[.ffffff]` (hours may exceed 23)."""
    frac = F.pmod(us, F.lit(1_000_000))
    return F.concat(
        _two_digits(_floor_div(us, 3_600_000_000)), F.lit(":"),
        _two_digits(F.pmod(_floor_div(us, 60_000_000), F.lit(60))), F.lit(":"),
        _two_digits(F.pmod(_floor_div(us, 1_000_000), F.lit(60))),
        F.when(frac > 0, F.concat(F.lit("."), F.lpad(frac.cast("string"), 6, "0"))).otherwise(F.lit("")),
    )


def micros_to_datetime_text(us: Column) -> Column:
    """Epoch microseconds -> `YYYY-MM-DD HH:MM:SS[.ffffff]`, without any session time zone."""
    day = F.date_from_unix_date(_floor_div(us, _US_PER_DAY).try_cast("int"))
    text = F.concat(day.cast("string"), F.lit(" "), _clock_text(F.pmod(us, F.lit(_US_PER_DAY))))
    return F.when(us.between(_MIN_DATETIME_US, _MAX_DATETIME_US), text)


def micros_to_time_text(us: Column) -> Column:
    text = F.concat(F.when(us < 0, F.lit("-")).otherwise(F.lit("")), _clock_text(F.abs(us)))
    return F.when(us.between(-_MAX_TIME_US, _MAX_TIME_US), text)


def bits_text(hex_pairs: Column) -> Column:
    """Little-endian bytes (io.debezium.data.Bits) -> the unsigned value as decimal text."""
    return (
        F.when(F.size(hex_pairs) == 0, F.lit("0"))
        .when(F.size(hex_pairs) <= 8, F.conv(F.array_join(F.reverse(hex_pairs), ""), 16, 10))
    )


_LIMB = 10**19  # base of the limbs an unscaled decimal is accumulated in
_D38 = "decimal(38,0)"


def _limbs_times_plus(acc: Column, mul: int, x: Column) -> Column:
    """acc * mul + x for acc = struct(l0, l1, l2) = l2 * 10^38 + l1 * 10^19 + l0 (exact:
    decimal(38,0) arithmetic, carries between limbs; l2 null once beyond 76 digits)."""
    limb = F.lit(str(_LIMB)).cast("decimal(20,0)")
    t0 = acc["l0"] * mul + x
    r0 = F.pmod(t0, limb)
    t1 = acc["l1"] * mul + ((t0 - r0) / limb).cast(_D38)
    r1 = F.pmod(t1, limb)
    l2 = F.try_add(F.try_multiply(acc["l2"], F.lit(mul)), ((t1 - r1) / limb).cast(_D38))
    return F.struct(r0.cast(_D38).alias("l0"), r1.cast(_D38).alias("l1"), l2.cast(_D38).alias("l2"))


def _unscaled(hex_pairs: Column) -> Column:
    """Big-endian two's-complement bytes -> the integer's exact decimal text (MySQL's 65
    digits and more: three decimal(38,0) limbs, so no digit is lost to Spark's 38)."""
    values = F.transform(hex_pairs, lambda p: F.conv(p, 16, 10).cast("int"))
    negative = F.coalesce(F.try_element_at(values, F.lit(1)) >= 128, F.lit(False))
    zero = F.lit(0).cast(_D38)
    # For a negative number sum the complemented bytes: -(~x + 1) needs no 256^n term.
    magnitude = F.aggregate(
        values, F.struct(zero.alias("l0"), zero.alias("l1"), zero.alias("l2")),
        lambda acc, x: _limbs_times_plus(acc, 256, F.when(negative, 255 - x).otherwise(x)),
    )
    magnitude = F.when(negative, _limbs_times_plus(magnitude, 1, F.lit(1))).otherwise(magnitude)
    digits = F.regexp_replace(F.concat(
        magnitude["l2"].cast("string"), F.lpad(magnitude["l1"].cast("string"), 19, "0"),
        F.lpad(magnitude["l0"].cast("string"), 19, "0"),
    ), r"^0+(?=\d)", "")
    return F.when(magnitude["l2"].isNotNull(), F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), digits))


def plain_number_text(text: Column) -> Column:
    """A JSON number in exponent form ("1.0E38", "-9.5e-7") -> plain decimal text; other
    text unchanged. For DECIMAL columns written as doubles (TiCDC's Debezium), so the
    snapshot sees the digits and not an exponent it cannot read as a decimal."""
    pattern = r"^(-?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)$"

    def group(i: int) -> Column:
        return F.regexp_extract(text, pattern, i)

    digits = F.concat(group(2), group(3))
    point = F.length(group(2)) + group(4).cast("int")
    body = (
        F.when(point <= 0, F.concat(F.lit("0."), F.repeat(F.lit("0"), -point), digits))
        .when(point >= F.length(digits), F.concat(digits, F.repeat(F.lit("0"), point - F.length(digits))))
        .otherwise(F.concat(digits.substr(F.lit(1), point), F.lit("."), digits.substr(point + 1, F.length(digits))))
    )
    plain = F.concat(group(1), F.regexp_replace(body, r"^0+(?=\d)", ""))
    return F.when(text.rlike(pattern), plain).otherwise(text)


def decimal_text(text: Column, scale: Column) -> Column:
    """Unscaled integer text + scale -> exact decimal text (string arithmetic, no rounding)."""
    digits = F.regexp_replace(text, "^-", "")
    padded = F.lpad(digits, F.greatest(F.length(digits), scale + 1), "0")
    int_len = F.length(padded) - scale
    body = F.when(
        scale > 0,
        F.concat(padded.substr(F.lit(1), int_len), F.lit("."), padded.substr(int_len + 1, scale)),
    ).otherwise(padded)
    sign = F.when(text.startswith("-"), F.lit("-")).otherwise(F.lit(""))
    return F.when(text.isNotNull() & (scale >= 0), F.concat(sign, body))


def _param(f: Column, name: str) -> Column:
    return F.try_element_at(f["parameters"], F.lit(name))


def _is_binary_type(type_name: Column) -> Column:
    return F.coalesce(F.lower(type_name).rlike(_BINARY_TYPE), F.lit(False))


# How a column's values convert: decided once per column from its field schema.
_RULE_BY_NAME = {
    DATE: "date", TIMESTAMP: "datetime_ms", MICRO_TIMESTAMP: "datetime_us", NANO_TIMESTAMP: "datetime_ns",
    ZONED_TIMESTAMP: "zoned", TIME: "time_ms", MICRO_TIME: "time_us", NANO_TIME: "time_ns", BITS: "bits",
    CONNECT_DECIMAL: "decimal", VARIABLE_SCALE_DECIMAL: "variable_decimal",
}
_DATETIME_RULES, _TIME_RULES = ("datetime_ms", "datetime_us", "datetime_ns", "zoned"), ("time_ms", "time_us", "time_ns")


def value_rule(f: Column) -> Column:
    """A field schema -> struct(rule, scale): how its values become canonical text."""
    declared = F.lower(F.coalesce(f["tidb_type"], _param(f, SOURCE_TYPE)))
    rule = F.coalesce(
        _lookup(f["name"], _RULE_BY_NAME),
        F.when((F.lower(f["type"]) == "bytes") | _is_binary_type(declared), F.lit("base64")),
        F.when(F.coalesce(declared.rlike(r"^\s*bigint\s+unsigned"), F.lit(False)), F.lit("unsigned_bigint")),
        # TiCDC writes DECIMAL as a JSON double: its digits, never an exponent.
        F.when(F.coalesce(declared.rlike(r"^\s*(decimal|numeric)\b"), F.lit(False)), F.lit("decimal_number")),
        F.lit("text"),
    )
    return F.struct(rule.alias("rule"), _param(f, "scale").try_cast("int").alias("scale"))


_NUMBER_RULES = ("date", "unsigned_bigint", *_DATETIME_RULES, *_TIME_RULES)
_BYTES_RULES = ("bits", "decimal", "variable_decimal", "base64")


def canonical_values(raw: Column, rules: Column) -> Column:
    """map<string, VARIANT> + per-column rules (map<string, struct(rule, scale)>, may be
    null) -> map<string, string> of canonical text.

    Several small passes instead of one big expression: each intermediate (number, micros,
    bytes, unscaled decimal) becomes a struct field that later passes refer to, because
    Spark expression trees are copied, not shared — one inlined expression reused in
    eight places is eight copies to analyze and run. Lambdas are interpreted, not
    compiled, so a pass only touches the values whose rule needs it: a plain column
    (rule `text`, most of them) is looked up once and passed through.
    """
    text_rule = F.struct(F.lit("text").alias("rule"), F.lit(None).cast("int").alias("scale"))
    staged = F.transform_values(raw, lambda k, x: F.struct(
        x.alias("x"),
        F.try_variant_get(x, "$", "string").alias("text"),  # numbers keep their digits
        F.coalesce(F.try_element_at(rules, k), text_rule).alias("r"),
        F.lit(None).cast("long").alias("number"),
        F.lit(None).cast("long").alias("micros"),
        F.lit(None).cast("int").alias("scale"),
        F.lit(None).cast("binary").alias("bytes"),
        F.lit(None).cast("boolean").alias("is_string"),
        F.lit(None).cast("array<string>").alias("hex"),
        F.lit(None).cast("string").alias("unscaled"),
    ))

    def numbers(k: Column, v: Column) -> Column:
        rule, text, x = v["r"]["rule"], v["text"], v["x"]
        number = text.try_cast("long")
        micros = (
            F.when(rule.isin("datetime_ms", "time_ms"), F.try_multiply(number, F.lit(1000)))
            .when(rule.isin("datetime_us", "time_us"), number)
            .when(rule.isin("datetime_ns", "time_ns"), _floor_div(number, 1000))
            .when(rule == "zoned", F.unix_micros(F.try_to_timestamp(text)))
        )
        variable = F.try_variant_get(x, "$", "struct<scale:int,value:string>")
        encoded = F.when(rule == "variable_decimal", variable["value"]).otherwise(text)
        return (
            F.when(rule.isin(*_NUMBER_RULES), v.withField("number", number).withField("micros", micros))
            .when(rule.isin(*_BYTES_RULES),
                  v.withField("bytes", F.try_to_binary(encoded, F.lit("base64")))
                  .withField("scale", F.coalesce(F.when(rule == "variable_decimal", variable["scale"]), v["r"]["scale"]))
                  # A Connect Decimal is base64 bytes; Flink CDC's numeric format writes a number.
                  .withField("is_string", F.when(rule == "decimal", F.schema_of_variant(x) == "STRING")))
            .otherwise(v)
        )

    def hex_pairs(k: Column, v: Column) -> Column:
        needs_hex = v["r"]["rule"].isin("bits", "decimal", "variable_decimal")
        return F.when(needs_hex, v.withField("hex", F.regexp_extract_all(F.hex(v["bytes"]), F.lit("(..)"), 1))
                      ).otherwise(v)

    def is_byte_decimal(v: Column) -> Column:
        rule = v["r"]["rule"]
        return ((rule == "decimal") & v["is_string"]) | (rule == "variable_decimal")

    def unscaled(k: Column, v: Column) -> Column:
        return F.when(is_byte_decimal(v) & v["bytes"].isNotNull(), v.withField("unscaled", _unscaled(v["hex"]))
                      ).otherwise(v)

    def final(k: Column, v: Column) -> Column:
        rule, text = v["r"]["rule"], v["text"]
        boolean = text.isin("true", "false") & (F.schema_of_variant(v["x"]) == "BOOLEAN")
        return (
            F.when(text.isNull(), F.lit(None).cast("string"))
            .when(boolean, F.when(text == "true", F.lit("1")).otherwise(F.lit("0")))
            .when(rule == "text", text)
            .when(rule == "date", F.date_from_unix_date(v["number"].try_cast("int")).cast("string"))
            .when(rule.isin(*_DATETIME_RULES), micros_to_datetime_text(v["micros"]))
            .when(rule.isin(*_TIME_RULES), micros_to_time_text(v["micros"]))
            .when(rule == "bits", F.when(v["bytes"].isNotNull(), bits_text(v["hex"])))
            .when(is_byte_decimal(v), decimal_text(v["unscaled"], v["scale"]))
            .when(rule.isin("decimal", "decimal_number"), plain_number_text(text))
            .when(rule == "base64", F.base64(v["bytes"]))
            .when((rule == "unsigned_bigint") & (v["number"] < 0),
                  (v["number"].cast("decimal(20,0)") + F.lit(str(_TWO_POW_64)).cast("decimal(20,0)")).cast("string"))
            .otherwise(text)
        )

    out = staged
    for step in (numbers, hex_pairs, unscaled, final):
        out = F.transform_values(out, step)
    return out


def _source_type(f: Column) -> Column:
    """`column.propagate.source.type` parameters -> "decimal(10,2)", "varbinary", ..."""
    base = F.lower(F.trim(_param(f, SOURCE_TYPE)))
    length, scale = _param(f, SOURCE_LENGTH), F.coalesce(_param(f, SOURCE_SCALE), F.lit("0"))
    return F.when(
        base.rlike(r"^(decimal|numeric)( unsigned)?( zerofill)?$") & length.isNotNull(),
        F.concat(F.lit("decimal("), length, F.lit(","), scale, F.lit(")")),
    ).otherwise(base)


def _lookup(key: Column, mapping: dict[str, str]) -> Column:
    """`mapping[key]` (null if absent): one lookup in a literal map, not a CASE per entry."""
    return F.try_element_at(F.create_map(*[F.lit(x) for item in mapping.items() for x in item]), key)


def column_type(f: Column) -> Column:
    """A field schema -> the MySQL type name the snapshot layer types the column with."""
    precision, scale = _param(f, "connect.decimal.precision"), _param(f, "scale")
    with_params = F.concat(F.lit("decimal("), precision, F.lit(","), F.coalesce(scale, F.lit("0")), F.lit(")"))
    connect_decimal = F.when(precision.isNotNull(), with_params).otherwise(F.lit("decimal"))
    named = F.when(f["name"] == CONNECT_DECIMAL, connect_decimal).otherwise(_lookup(f["name"], _NAMED_TYPES))
    return F.coalesce(
        F.lower(F.trim(f["tidb_type"])), _source_type(f), named, _lookup(F.lower(f["type"]), _CONNECT_TYPES),
        F.lit("varchar"),
    )


def value_kind_type(x: Column) -> Column:
    """No schema: the JSON kind of the value -> a type that holds it without loss."""
    kind = F.schema_of_variant(x)
    return (
        F.when(kind == "BOOLEAN", F.lit("boolean"))
        .when(kind.isin("TINYINT", "SMALLINT", "INT", "BIGINT") | kind.startswith("DECIMAL"), F.lit("decimal"))
        .when(kind.isin("DOUBLE", "FLOAT"), F.lit("double"))
        .when(kind.startswith("OBJECT") | kind.startswith("ARRAY"), F.lit("json"))
        .otherwise(F.lit("varchar"))
    )


def is_null_value(x: Column) -> Column:
    return x.isNull() | F.coalesce(F.is_variant_null(x), F.lit(True))
