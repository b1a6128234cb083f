// Tests of reap::gguf's reader, KV store and type table (core only, no llama):
// a seeded damaged-file generator (one corruption per kind of damage, each
// must be rejected with a message naming the object), truncation at seeded
// positions, seeded byte flips (no crash), typed getters that report wrong
// types, and the byte-identical round trip of a file through the writer.
#include "gguf_test_util.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace g = reap::gguf;
using namespace gguf_test;

namespace {

// The valid base file: the test model written by reap's writer, and its raw form.
struct base_file {
    std::vector<uint8_t> bytes;
    g::file_header       header;
    raw_file             raw;
};

base_file make_base(const std::string & dir, const model_options & o = {}) {
    base_file b;
    const std::string path = dir + "/base.gguf";
    write_model(path, o);
    b.bytes = read_all(path);
    std::string err;
    EXPECT_TRUE(g::parse_header(b.bytes.data(), b.bytes.size(), "base", b.header, err)) << err;
    b.raw = raw_from_header(b.header, b.bytes);
    return b;
}

// Parses `bytes` both from memory and from a file; expects both to fail with a
// message containing every string of `needles`. Returns the message.
std::string expect_rejected(const std::string & dir, const std::vector<uint8_t> & bytes,
                            const std::vector<std::string> & needles, const std::string & kind) {
    g::file_header h;
    std::string err;
    EXPECT_FALSE(g::parse_header(bytes.data(), bytes.size(), "damaged.gguf", h, err)) << kind << ": accepted";
    for (const std::string & n : needles) {
        EXPECT_NE(err.find(n), std::string::npos) << kind << ": message '" << err << "' does not mention '" << n << "'";
    }
    const std::string path = dir + "/damaged.gguf";
    write_all(path, bytes);
    std::string ferr;
    EXPECT_FALSE(g::read_header(path, h, ferr)) << kind << ": accepted from file";
    EXPECT_NE(ferr.find(path), std::string::npos) << kind << ": file message '" << ferr << "' does not name the file";
    // The same check from the file must give the same message (but for the name).
    EXPECT_EQ(ferr.substr(path.size()), err.substr(std::string("damaged.gguf").size())) << kind;
    return err;
}

raw_kv * find_kv(raw_file & r, const std::string & key) {
    for (raw_kv & k : r.kvs) {
        if (k.key == key) return &k;
    }
    return nullptr;
}

raw_tensor * find_tensor(raw_file & r, const std::string & name) {
    for (raw_tensor & t : r.tensors) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

} // namespace

TEST(GgufTypes, TableMatchesGgml) {
    struct expect { uint32_t id; const char * name; int64_t block; uint64_t bytes; };
    const expect table[] = {
        {0, "f32", 1, 4}, {1, "f16", 1, 2}, {2, "q4_0", 32, 18}, {8, "q8_0", 32, 34}, {10, "q2_K", 256, 84},
        {12, "q4_K", 256, 144}, {14, "q6_K", 256, 210}, {16, "iq2_xxs", 256, 66}, {19, "iq1_s", 256, 50},
        {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1}, {27, "i64", 1, 8}, {28, "f64", 1, 8},
        {29, "iq1_m", 256, 56}, {30, "bf16", 1, 2}, {34, "tq1_0", 256, 54}, {35, "tq2_0", 256, 66},
        {39, "mxfp4", 32, 17}, {40, "nvfp4", 64, 36}, {41, "q1_0", 128, 18}, {42, "q2_0", 64, 18},
    };
    for (const expect & e : table) {
        const g::type_info * t = g::find_type(e.id);
        ASSERT_NE(t, nullptr) << e.name;
        EXPECT_STREQ(t->name, e.name);
        EXPECT_EQ(t->block_size, e.block);
        EXPECT_EQ(t->block_bytes, e.bytes) << e.name;
        EXPECT_EQ(g::find_type(std::string(e.name)), t);
    }
    EXPECT_EQ(g::all_types().size(), 35u);
    for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u}) {
        EXPECT_EQ(g::find_type(removed), nullptr) << removed;
    }
    EXPECT_EQ(g::find_type(std::string("Q4_K")), g::find_type(12u));
    uint64_t n = 0;
    std::string err;
    const int64_t ne[4] = {512, 3, 2, 1};
    ASSERT_TRUE(g::tensor_nbytes(g::tensor_type::Q4_K, 3, ne, n, err)) << err;
    EXPECT_EQ(n, 2u * 3 * 2 * 144);
    const int64_t bad[4] = {100, 1, 1, 1};
    EXPECT_FALSE(g::tensor_nbytes(g::tensor_type::Q4_K, 1, bad, n, err, "tensor 'x'"));
    EXPECT_NE(err.find("tensor 'x'"), std::string::npos) << err;
}

TEST(GgufKv, TypedGettersReportWrongTypes) {
    g::kv_store s;
    s.set_u32("a.u32", 7);
    s.set_u16("a.u16", 65535);
    s.set_i32("a.neg", -1);
    s.set_u64("a.big", 1ull << 40);
    s.set_string("qwen3moe.expert_count", "128");
    s.set_f32("a.f32", 0.5f);
    s.set_bool("a.bool", true);
    s.set_string_array("a.strs", {"x", "yy", ""});
    s.set_i32_array("a.ints", {1, -2, 3});
    s.set_f32_array("a.floats", {1.5f});

    std::string err;
    uint32_t u32 = 0;
    EXPECT_TRUE(s.get_u32("a.u32", u32, err));
    EXPECT_EQ(u32, 7u);
    EXPECT_TRUE(s.get_u32("a.u16", u32, err));
    EXPECT_EQ(u32, 65535u);
    EXPECT_FALSE(s.get_u32("a.neg", u32, err));
    EXPECT_NE(err.find("'a.neg' = -1 (i32) does not fit u32"), std::string::npos) << err;
    EXPECT_FALSE(s.get_u32("a.big", u32, err));
    EXPECT_NE(err.find("does not fit u32"), std::string::npos) << err;
    uint64_t u64 = 0;
    EXPECT_TRUE(s.get_u64("a.big", u64, err));
    EXPECT_EQ(u64, 1ull << 40);
    int64_t i64 = 0;
    EXPECT_TRUE(s.get_i64("a.neg", i64, err));
    EXPECT_EQ(i64, -1);

    // expert_count stored as a string: an error naming key, expected and actual type.
    EXPECT_FALSE(s.get_u32("qwen3moe.expert_count", u32, err));
    EXPECT_EQ(err, "key 'qwen3moe.expert_count' has type string, expected u32");
    EXPECT_FALSE(s.get_u32("a.f32", u32, err));
    EXPECT_NE(err.find("has type f32, expected u32"), std::string::npos) << err;
    EXPECT_FALSE(s.get_u32("a.missing", u32, err));
    EXPECT_EQ(err, "key 'a.missing' is missing");
    EXPECT_TRUE(s.get_u32_or("a.missing", 9, u32, err));
    EXPECT_EQ(u32, 9u);
    EXPECT_FALSE(s.get_u32_or("a.f32", 9, u32, err));

    float f = 0;
    EXPECT_TRUE(s.get_f32("a.f32", f, err));
    EXPECT_EQ(f, 0.5f);
    EXPECT_FALSE(s.get_f32("a.u32", f, err));
    bool b = false;
    EXPECT_TRUE(s.get_bool("a.bool", b, err));
    EXPECT_TRUE(b);
    EXPECT_FALSE(s.get_bool("a.u32", b, err));
    std::string str;
    EXPECT_FALSE(s.get_string("a.u32", str, err));
    EXPECT_NE(err.find("expected string"), std::string::npos);

    std::vector<std::string> strs;
    EXPECT_TRUE(s.get_string_array("a.strs", strs, err));
    EXPECT_EQ(strs, (std::vector<std::string>{"x", "yy", ""}));
    EXPECT_FALSE(s.get_string_array("a.ints", strs, err));
    EXPECT_NE(err.find("has type array[i32], expected array[string]"), std::string::npos) << err;
    std::vector<int64_t> ints;
    EXPECT_TRUE(s.get_i64_array("a.ints", ints, err));
    EXPECT_EQ(ints, (std::vector<int64_t>{1, -2, 3}));
    EXPECT_FALSE(s.get_i64_array("a.floats", ints, err));
    std::vector<double> dbl;
    EXPECT_TRUE(s.get_f64_array("a.floats", dbl, err));
    EXPECT_EQ(dbl, (std::vector<double>{1.5}));

    // Setting an existing key keeps its position; remove() drops it.
    const size_t pos = 0;
    s.set_u32("a.u32", 8);
    EXPECT_EQ(s.entries[pos].key, "a.u32");
    EXPECT_TRUE(s.get_u32("a.u32", u32, err));
    EXPECT_EQ(u32, 8u);
    EXPECT_TRUE(s.remove("a.u32"));
    EXPECT_FALSE(s.remove("a.u32"));
    EXPECT_FALSE(s.has("a.u32"));
    EXPECT_EQ(s.find("a.strs")->value_string(), "[\"x\", \"yy\", \"\"]");
}

TEST(GgufReader, ReadsWhatTheWriterWrote) {
    const std::string dir = scratch_dir("gguf_reader_basic");
    const g::output_spec spec = make_model_spec();
    const std::string path = dir + "/m.gguf";
    write_model(path);
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(path, m, err)) << err;
    ASSERT_EQ(m.shards.size(), 1u);
    ASSERT_EQ(m.tensors.size(), spec.tensors.size());
    ASSERT_EQ(m.kvs.entries.size(), spec.kvs.entries.size());
    for (size_t i = 0; i < spec.kvs.entries.size(); ++i) {
        EXPECT_EQ(m.kvs.entries[i].key, spec.kvs.entries[i].key);
        EXPECT_EQ(m.kvs.entries[i].raw, spec.kvs.entries[i].raw);
    }
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
        const g::tensor_info & t = m.tensors[i];
        EXPECT_EQ(t.name, spec.tensors[i].name);
        EXPECT_EQ(t.type, spec.tensors[i].type);
        EXPECT_EQ(t.file_offset % 32, 0u);
        std::vector<uint8_t> data;
        ASSERT_TRUE(g::read_tensor(m, t.name, data, err)) << err;
        EXPECT_EQ(data, *spec.tensors[i].memory) << t.name;
        EXPECT_EQ(m.find_tensor(t.name), &t);
    }
    EXPECT_EQ(m.find_tensor("nope"), nullptr);
    uint8_t byte = 0;
    EXPECT_FALSE(g::read_tensor_bytes(m, m.tensors[0], m.tensors[0].nbytes, 1, &byte, err));
}

// Read a file and write it back unchanged: byte-identical, for several variants.
TEST(GgufReader, RoundTripIsByteIdentical) {
    const std::string dir = scratch_dir("gguf_roundtrip");
    std::vector<model_options> variants(4);
    variants[1].alignment = 64;
    variants[2].version = 2;
    variants[2].seed = 7;
    variants[3].alignment = 4096;
    variants[3].n_expert = 8;
    for (size_t v = 0; v < variants.size(); ++v) {
        const std::string in = dir + "/in" + std::to_string(v) + ".gguf";
        const std::string out = dir + "/out" + std::to_string(v) + ".gguf";
        write_model(in, variants[v]);
        g::model m;
        std::string err;
        ASSERT_TRUE(g::open_model(in, m, err)) << err;
        std::vector<std::string> written;
        g::write_options wo;
        wo.sync = false;
        wo.copy_file_range = v % 2 == 0;   // both copy paths: kernel copy and the pread/write buffer
        ASSERT_TRUE(g::write_output(g::spec_from_model(m), wo, out, written, err)) << err;
        ASSERT_EQ(written, std::vector<std::string>{out});
        const std::vector<uint8_t> a = read_all(in), b = read_all(out);
        ASSERT_EQ(a.size(), b.size()) << "variant " << v;
        EXPECT_TRUE(a == b) << "variant " << v << ": output differs from input";
        // layout_output predicts the exact size.
        std::vector<g::shard_layout> layout;
        ASSERT_TRUE(g::layout_output(g::spec_from_model(m), wo, out, layout, err)) << err;
        EXPECT_EQ(layout[0].file_bytes, b.size());
        EXPECT_EQ(layout[0].data_offset, m.shards[0].data_offset);
    }
}

// The raw serializer reproduces the writer's bytes, so damage applied to it is
// damage to an otherwise valid file.
TEST(GgufDamage, RawSerializerMatchesWriter) {
    const std::string dir = scratch_dir("gguf_raw");
    base_file b = make_base(dir);
    EXPECT_TRUE(b.raw.serialize() == b.bytes);
}

TEST(GgufDamage, EveryKindIsRejectedWithAMessage) {
    const std::string dir = scratch_dir("gguf_damage");
    const base_file base = make_base(dir);
    const std::string exps = "blk.0.ffn_up_exps.weight";

    struct damage {
        std::string                    kind;
        std::function<void(raw_file &)> apply;
        std::vector<std::string>       needles;
    };
    std::vector<damage> kinds = {
        {"bad magic", [](raw_file & r) { std::memcpy(r.magic, "GGML", 4); }, {"bad magic", "not a GGUF file"}},
        {"version 1", [](raw_file & r) { r.version = 1; }, {"unsupported GGUF version 1"}},
        {"version 4", [](raw_file & r) { r.version = 4; }, {"unsupported GGUF version 4"}},
        {"big-endian version", [](raw_file & r) { r.version = 0x03000000u; }, {"big-endian"}},
        {"n_tensors huge", [](raw_file & r) { r.n_tensors_override = 1ll << 60; }, {"n_tensors = 1152921504606846976"}},
        {"n_kv huge", [](raw_file & r) { r.n_kv_override = 1ll << 40; }, {"n_kv = 1099511627776"}},
        {"n_kv one too many", [](raw_file & r) { r.n_kv_override = (int64_t) r.kvs.size() + 1; }, {}},
        {"string length past EOF", [](raw_file & r) {
             find_kv(r, "general.name")->value = u64_bytes(1ull << 40);
         }, {"key 'general.name' value", "string length 1099511627776", "past end of file"}},
        {"empty key", [](raw_file & r) { r.kvs[2].key = ""; }, {"kv #2", "empty key"}},
        {"duplicate key", [](raw_file & r) { r.kvs[3].key = r.kvs[1].key; }, {"duplicate key 'general.name'", "kv #3"}},
        {"unknown value type", [](raw_file & r) { find_kv(r, "reap.test.u8")->type = 13; },
         {"key 'reap.test.u8'", "unknown value type 13"}},
        {"nested array", [](raw_file & r) {
             raw_kv * k = find_kv(r, "tokenizer.ggml.scores");
             k->value = u32_bytes((uint32_t) g::value_type::ARRAY);
             auto n = u64_bytes(1);
             k->value.insert(k->value.end(), n.begin(), n.end());
         }, {"key 'tokenizer.ggml.scores'", "nested array"}},
        {"unknown array element type", [](raw_file & r) {
             raw_kv * k = find_kv(r, "tokenizer.ggml.scores");
             std::memset(k->value.data(), 0x77, 1);
         }, {"key 'tokenizer.ggml.scores'", "unknown array element type 119"}},
        {"array length huge", [](raw_file & r) {
             raw_kv * k = find_kv(r, "tokenizer.ggml.token_type");
             uint64_t n = 1ull << 61;
             std::memcpy(k->value.data() + 4, &n, 8);
         }, {"key 'tokenizer.ggml.token_type'", "array length 2305843009213693952"}},
        {"array string element past EOF", [](raw_file & r) {
             raw_kv * k = find_kv(r, "tokenizer.ggml.tokens");
             uint64_t n = 1ull << 50;
             std::memcpy(k->value.data() + 12, &n, 8);
         }, {"key 'tokenizer.ggml.tokens' element 0", "string length"}},
        {"tensor name of 64 bytes", [](raw_file & r) { r.tensors[1].name = std::string(64, 'n'); },
         {"tensor #1 name", "is 64 bytes", "at most 63"}},
        {"empty tensor name", [](raw_file & r) { r.tensors[1].name = ""; }, {"tensor #1", "empty name"}},
        {"duplicate tensor name", [](raw_file & r) { r.tensors[2].name = r.tensors[1].name; },
         {"duplicate tensor name 'blk.0.attn_norm.weight'", "tensor #2"}},
        {"n_dims 0", [](raw_file & r) { r.tensors[0].n_dims = 0; r.tensors[0].ne.clear(); },
         {"tensor 'token_embd.weight'", "n_dims = 0"}},
        {"n_dims 5", [](raw_file & r) { r.tensors[0].n_dims = 5; r.tensors[0].ne = {64, 10, 1, 1, 1}; },
         {"tensor 'token_embd.weight'", "n_dims = 5"}},
        {"negative ne", [&](raw_file & r) { find_tensor(r, exps)->ne[1] = -32; },
         {"tensor '" + exps + "'", "ne[1] = -32 is negative"}},
        {"ne overflow", [&](raw_file & r) { find_tensor(r, exps)->ne = {1ll << 40, 1ll << 30, 4}; },
         {"tensor '" + exps + "'", "overflows"}},
        {"byte count overflow", [&](raw_file & r) { find_tensor(r, "token_embd.weight")->ne = {1ll << 62, 1}; },
         {"tensor 'token_embd.weight'", "byte count"}},
        {"removed ggml type", [&](raw_file & r) { find_tensor(r, exps)->type = 4; },
         {"tensor '" + exps + "'", "unknown or removed ggml type 4"}},
        {"unknown ggml type", [&](raw_file & r) { find_tensor(r, exps)->type = 99; },
         {"tensor '" + exps + "'", "ggml type 99"}},
        {"ne[0] not a multiple of the block size", [&](raw_file & r) { find_tensor(r, exps)->ne[0] = 48; },
         {"tensor '" + exps + "'", "ne[0] = 48 is not a multiple of the block size 32 of type mxfp4"}},
        {"alignment not a power of two", [](raw_file & r) {
             r.kvs.push_back({"general.alignment", (uint32_t) g::value_type::U32, u32_bytes(48)});
         }, {"general.alignment = 48 is not a power of two"}},
        {"alignment zero", [](raw_file & r) {
             r.kvs.push_back({"general.alignment", (uint32_t) g::value_type::U32, u32_bytes(0)});
         }, {"general.alignment = 0"}},
        {"alignment too large", [](raw_file & r) {
             r.kvs.push_back({"general.alignment", (uint32_t) g::value_type::U32, u32_bytes(1u << 21)});
         }, {"general.alignment = 2097152 exceeds"}},
        {"alignment of wrong type", [](raw_file & r) {
             r.kvs.push_back({"general.alignment", (uint32_t) g::value_type::U64, u64_bytes(32)});
         }, {"general.alignment has type u64, expected u32"}},
        {"alignment as string", [](raw_file & r) {
             r.kvs.push_back({"general.alignment", (uint32_t) g::value_type::STRING, string_bytes("32")});
         }, {"general.alignment has type string, expected u32"}},
        {"misaligned offset", [&](raw_file & r) { find_tensor(r, exps)->offset += 8; },
         {"tensor '" + exps + "'", "is not a multiple of the alignment 32"}},
        {"offsets out of order", [](raw_file & r) { std::swap(r.tensors[1].offset, r.tensors[2].offset); },
         {"tensor 'blk.0.attn_q.weight'", "overlaps or precedes tensor 'blk.0.attn_norm.weight'"}},
        {"overlapping offsets", [](raw_file & r) { r.tensors[2].offset = r.tensors[1].offset; },
         {"overlaps or precedes"}},
        {"data past EOF", [](raw_file & r) { r.data.resize(r.data.size() - 33); },
         {"tensor 'output.weight': data [", ") ends past end of file (size"}},
        {"offset far past EOF", [&](raw_file & r) { find_tensor(r, exps)->offset = 1ull << 62; },
         {"tensor '" + exps + "': data [", "ends past end of file"}},
        {"offset near 2^64", [&](raw_file & r) { find_tensor(r, "output.weight")->offset = ~0ull - 31; },
         {"tensor 'output.weight'", "ends past end of file"}},
        {"data section past EOF", [](raw_file & r) { r.data.clear(); r.alignment = 1; r.kvs.push_back(
             {"general.alignment", (uint32_t) g::value_type::U32, u32_bytes(1u << 20)}); },
         {"data section starts at offset"}},
        {"header cut inside tensor infos", [](raw_file & r) { r.n_tensors_override = (int64_t) r.tensors.size() + 1;
             r.data.clear(); }, {}},
    };
    ASSERT_GE(kinds.size(), 20u);
    for (const damage & d : kinds) {
        SCOPED_TRACE(d.kind);
        raw_file r = base.raw;
        d.apply(r);
        const std::string msg = expect_rejected(dir, r.serialize(), d.needles, d.kind);
        EXPECT_FALSE(msg.empty());
    }
}

// A file cut at any position is rejected (not crashed on) with a message.
TEST(GgufDamage, TruncationAtSeededPositions) {
    const std::string dir = scratch_dir("gguf_truncate");
    const base_file base = make_base(dir);
    std::mt19937 rng(20261129);
    std::vector<size_t> cuts = {0, 1, 3, 4, 7, 8, 16, 23, 24, (size_t) base.header.header_bytes - 1,
                                (size_t) base.header.header_bytes, (size_t) base.header.data_offset,
                                base.bytes.size() - 1};
    for (int i = 0; i < 200; ++i) cuts.push_back(rng() % base.bytes.size());
    uint64_t data_end = 0;   // the last tensor's padding may be cut without harm
    for (const g::tensor_info & t : base.header.tensors) data_end = std::max(data_end, t.file_offset + t.nbytes);
    ASSERT_LT(data_end, base.bytes.size());
    for (size_t cut : cuts) {
        std::vector<uint8_t> bytes(base.bytes.begin(), base.bytes.begin() + (ptrdiff_t) cut);
        g::file_header h;
        std::string err;
        if (cut >= data_end) {
            EXPECT_TRUE(g::parse_header(bytes.data(), bytes.size(), "cut.gguf", h, err)) << err;
            continue;
        }
        EXPECT_FALSE(g::parse_header(bytes.data(), bytes.size(), "cut.gguf", h, err)) << "cut at " << cut;
        EXPECT_EQ(err.rfind("cut.gguf: ", 0), 0u) << err;
        const bool names_cause = err.find("truncated") != std::string::npos ||
                                 err.find("past end") != std::string::npos ||
                                 err.find("cannot fit") != std::string::npos;
        EXPECT_TRUE(names_cause) << "cut at " << cut << ": " << err;
    }
}

// Seeded byte flips: never a crash; a rejection always has a message; an accepted
// file has all its tensor data inside the file.
TEST(GgufDamage, SeededByteFlipsNeverCrash) {
    const std::string dir = scratch_dir("gguf_flips");
    const base_file base = make_base(dir);
    std::mt19937 rng(42);
    int rejected = 0;
    for (int i = 0; i < 3000; ++i) {
        std::vector<uint8_t> bytes = base.bytes;
        const int n_flips = 1 + (int) (rng() % 4);
        for (int f = 0; f < n_flips; ++f) {
            const size_t at = rng() % base.header.header_bytes;   // damage the header, where parsing happens
            bytes[at] ^= (uint8_t) (1u << (rng() % 8));
        }
        g::file_header h;
        std::string err;
        if (!g::parse_header(bytes.data(), bytes.size(), "flip.gguf", h, err)) {
            EXPECT_GT(err.size(), std::string("flip.gguf: ").size());
            ++rejected;
            continue;
        }
        for (const g::tensor_info & t : h.tensors) {
            EXPECT_LE(t.file_offset + t.nbytes, bytes.size()) << t.name;
        }
    }
    EXPECT_GT(rejected, 100);
}

// The typed getter on a parsed file: expert_count stored as a string.
TEST(GgufDamage, ExpertCountAsStringIsReportedByTheGetter) {
    const std::string dir = scratch_dir("gguf_expert_string");
    base_file base = make_base(dir);
    raw_file r = base.raw;
    raw_kv * k = find_kv(r, "qwen3moe.expert_count");
    k->type = (uint32_t) g::value_type::STRING;
    k->value = string_bytes("4");
    const std::vector<uint8_t> bytes = r.serialize();
    g::file_header h;
    std::string err;
    ASSERT_TRUE(g::parse_header(bytes.data(), bytes.size(), "s.gguf", h, err)) << err;
    uint32_t n = 0;
    EXPECT_FALSE(h.kvs.get_u32("qwen3moe.expert_count", n, err));
    EXPECT_EQ(err, "key 'qwen3moe.expert_count' has type string, expected u32");
}

TEST(GgufReader, MissingOrOddFiles) {
    const std::string dir = scratch_dir("gguf_missing");
    g::file_header h;
    std::string err;
    EXPECT_FALSE(g::read_header(dir + "/does-not-exist.gguf", h, err));
    EXPECT_NE(err.find("does-not-exist.gguf: cannot open"), std::string::npos) << err;
    EXPECT_FALSE(g::read_header(dir, h, err));
    EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
    write_all(dir + "/empty.gguf", {});
    EXPECT_FALSE(g::read_header(dir + "/empty.gguf", h, err));
    EXPECT_NE(err.find("truncated: magic"), std::string::npos) << err;
}
