// test_cli_hostile_inputs.cpp: the table of hostile inputs (issue 23). Each row
// is one damaged or hostile input (a GGUF model, plan, saliency archive,
// imatrix, eval record, path or option) given to one reap command; every row
// must exit with its code (2: a usage, I/O or format error) and print a
// message holding its text, which names what is wrong. The same table is in
// docs/reliability.md, section "Hostile inputs": HostileInputs.DocsHoldTheTable
// compares the two (REAP_PRINT_HOSTILE_TABLE=1 prints the table to paste).
// Inputs are made here from a small valid model, plan and archive, damaged
// one field at a time (the raw serializer of gguf_test_util.h), through the
// reap binary ($REAP_BIN).
#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "plan/plan.h"
#include "prune_test_util.h"
#include "saliency/archive.h"
#include "saliency_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace g = reap::gguf;
namespace s = reap::saliency;
using prune_test::quote;

namespace {

// The valid inputs every row starts from, in one scratch folder.
struct inputs {
    std::string dir, model, plan, sal, cut;
    std::vector<uint8_t> model_bytes;
    std::string plan_text;
};

void write_bytes(const std::string & path, const std::vector<uint8_t> & b) { gguf_test::write_all(path, b); }

void write_text(const std::string & path, const std::string & text) {
    write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// The model's header as raw fields, damaged by `damage`, then serialized.
std::vector<uint8_t> damaged(const inputs & in, const std::function<void(gguf_test::raw_file &)> & damage) {
    g::file_header h;
    std::string err;
    if (!g::read_header(in.model, h, err)) ADD_FAILURE() << err;
    gguf_test::raw_file r = gguf_test::raw_from_header(h, in.model_bytes);
    damage(r);
    return r.serialize();
}

// The element of `items` whose name (`name_of`) is `name`; a test failure and
// a scratch element when there is none.
template <typename T, typename F> T * named(std::vector<T> & items, const std::string & name, F name_of) {
    for (T & x : items) {
        if (name_of(x) == name) return &x;
    }
    ADD_FAILURE() << "the test model has no " << name;
    static T none;
    return &none;
}

gguf_test::raw_kv * kv_named(gguf_test::raw_file & r, const std::string & key) {
    return named(r.kvs, key, [](const gguf_test::raw_kv & k) { return k.key; });
}

gguf_test::raw_tensor * tensor_named(gguf_test::raw_file & r, const std::string & name) {
    return named(r.tensors, name, [](const gguf_test::raw_tensor & t) { return t.name; });
}

std::vector<uint8_t> first_bytes(const std::vector<uint8_t> & b, size_t n) { return {b.begin(), b.begin() + (ptrdiff_t) n}; }

// The plan's JSON text with `from` replaced by `to` (once; the text must hold it).
std::string plan_with(const inputs & in, const std::string & from, const std::string & to) {
    std::string t = in.plan_text;
    const size_t at = t.find(from);
    if (at == std::string::npos) {
        ADD_FAILURE() << "the plan has no " << from;
        return t;
    }
    return t.replace(at, from.size(), to);
}

// The plan's JSON text with the first kept id replaced by `value` (text).
std::string first_id(const inputs & in, const std::string & value) {
    std::string t = in.plan_text;
    const size_t at = t.find('[', t.find("\"keep\"")) + 1;
    const size_t end = t.find_first_of(",]", at);
    return t.replace(at, end - at, value);
}

// The second kept id of the first layer.
int second_id(const inputs & in) {
    const std::string & t = in.plan_text;
    const size_t comma = t.find(',', t.find('[', t.find("\"keep\"")));
    return std::atoi(t.c_str() + comma + 1);
}

// A legacy llama-imatrix .dat: entry count, then per entry name, ncall, values.
std::vector<uint8_t> legacy_dat(int32_t n_entries, int32_t name_len, const std::string & name, int32_t n_values) {
    std::vector<uint8_t> b;
    gguf_test::put<int32_t>(b, n_entries);
    gguf_test::put<int32_t>(b, name_len);
    b.insert(b.end(), name.begin(), name.end());
    gguf_test::put<int32_t>(b, 1);
    gguf_test::put<int32_t>(b, n_values);
    return b;
}

// One row: `make` writes the hostile input to `bad` (or makes the path what
// it is); `args` are reap's arguments, with {bad}, {model}, {plan}, {sal},
// {cut} (the model pruned by the plan) and {out} (a fresh output path) replaced.
struct hostile_case {
    const char * input;
    const char * args;
    std::function<void(const inputs &, const std::string & bad)> make;
    int          exit_code;
    const char * message;
};

const std::vector<hostile_case> & cases() {
    using b = std::vector<uint8_t>;
    auto file = [](std::function<b(const inputs &)> f) {
        return [f](const inputs & in, const std::string & bad) { write_bytes(bad, f(in)); };
    };
    auto text = [](std::function<std::string(const inputs &)> f) {
        return [f](const inputs & in, const std::string & bad) { write_text(bad, f(in)); };
    };
    auto model_with = [file](std::function<void(gguf_test::raw_file &)> d) {
        return file([d](const inputs & in) { return damaged(in, d); });
    };
    static const std::vector<hostile_case> table = {
        // ---- GGUF model files (inspect, plan, prune) ----
        {"model: empty file", "inspect {bad}", file([](const inputs &) { return b{}; }), 2, "magic needs 4 bytes at offset 0, only 0 left"},
        {"model: 3 bytes", "inspect {bad}", file([](const inputs &) { return b{'G', 'G', 'U'}; }), 2, "magic needs 4 bytes at offset 0, only 3 left"},
        {"model: wrong magic", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { r.magic[3] = 'X'; }), 2, "not a GGUF file"},
        {"model: version 1", "inspect {bad}", model_with([](gguf_test::raw_file & r) { r.version = 1; }), 2, "unsupported GGUF version 1"},
        {"model: version 99", "inspect {bad}", model_with([](gguf_test::raw_file & r) { r.version = 99; }), 2, "unsupported GGUF version 99"},
        {"model: cut inside the header", "inspect {bad}", file([](const inputs & in) { return first_bytes(in.model_bytes, 40); }), 2,
         "n_tensors = 10 cannot fit in the 16 bytes left"},
        {"model: cut inside the tensor infos", "inspect {bad}",
         file([](const inputs & in) {
             g::file_header h;
             std::string err;
             g::read_header(in.model, h, err);
             return first_bytes(in.model_bytes, (size_t) h.data_offset - 40);
         }),
         2, "runs past end of file"},
        {"model: cut inside the tensor data", "prune -m {bad} --plan {plan} -o {out}",
         file([](const inputs & in) { return first_bytes(in.model_bytes, in.model_bytes.size() - 100); }), 2,
         "tensor 'output.weight': data [51840, 53940) ends past end of file"},
        {"model: tensor count 2^62", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { r.n_tensors_override = (int64_t) 1 << 62; }), 2,
         "n_tensors = 4611686018427387904 cannot fit"},
        {"model: KV count 2^62", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { r.n_kv_override = (int64_t) 1 << 62; }), 2,
         "n_kv = 4611686018427387904 cannot fit"},
        {"model: KV count one too many", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { r.n_kv_override = (int64_t) r.kvs.size() + 1; }), 2,
         "runs past end of file"},
        {"model: an empty KV key", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { r.kvs.insert(r.kvs.begin(), gguf_test::raw_kv{"", 4, gguf_test::u32_bytes(1)}); }), 2,
         "kv #0 at offset 24 has an empty key"},
        {"model: a KV key of length 2^40", "inspect {bad}",
         file([](const inputs & in) {
             // the first KV's key length (just after the 24-byte header) made huge
             b x = in.model_bytes;
             const b n = gguf_test::u64_bytes((uint64_t) 1 << 40);
             std::copy(n.begin(), n.end(), x.begin() + 24);
             return x;
         }),
         2, "kv #0 key: string length 1099511627776"},
        {"model: a string KV of length 2^62", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { kv_named(r, "general.name")->value = gguf_test::u64_bytes((uint64_t) 1 << 62); }), 2,
         "key 'general.name' value: string length 4611686018427387904"},
        {"model: a KV of type 99", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { kv_named(r, "reap.test.u8")->type = 99; }), 2, "key 'reap.test.u8': unknown value type 99"},
        {"model: an array KV of 2^61 elements", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) {
             gguf_test::raw_kv * k = kv_named(r, "tokenizer.ggml.scores");
             b v = gguf_test::u32_bytes(6);   // element type f32
             const b n = gguf_test::u64_bytes((uint64_t) 1 << 61);
             v.insert(v.end(), n.begin(), n.end());
             k->value = v;
         }),
         2, "key 'tokenizer.ggml.scores': array length 2305843009213693952"},
        {"model: an array of arrays", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) {
             gguf_test::raw_kv * k = kv_named(r, "tokenizer.ggml.scores");
             b v = gguf_test::u32_bytes(9);   // element type: array
             const b n = gguf_test::u64_bytes(1);
             v.insert(v.end(), n.begin(), n.end());
             k->value = v;
         }),
         2, "nested array (array of arrays)"},
        {"model: duplicate KV key", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { r.kvs.push_back(r.kvs[1]); }), 2, "duplicate key 'general.name'"},
        {"model: general.alignment 0", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) {
             r.kvs.push_back({"general.alignment", 4, gguf_test::u32_bytes(0)});
         }),
         2, "general.alignment = 0 is not a power of two"},
        {"model: general.alignment 48 (not a power of 2)", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) {
             r.kvs.push_back({"general.alignment", 4, gguf_test::u32_bytes(48)});
         }),
         2, "general.alignment = 48 is not a power of two"},
        {"model: general.alignment of type string", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) {
             r.kvs.push_back({"general.alignment", 8, gguf_test::string_bytes("32")});
         }),
         2, "general.alignment has type string, expected u32"},
        {"model: a tensor of 9 dimensions", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) {
             gguf_test::raw_tensor * t = tensor_named(r, "output_norm.weight");
             t->n_dims = 9;
             t->ne.assign(9, 1);
             t->ne[0] = 64;
         }),
         2, "tensor 'output_norm.weight': n_dims = 9 outside 1..4"},
        {"model: a negative dimension", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { tensor_named(r, "output_norm.weight")->ne[0] = -64; }), 2,
         "ne[0] = -64 is negative"},
        {"model: a shape whose element count overflows", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) {
             gguf_test::raw_tensor * t = tensor_named(r, "blk.0.attn_q.weight");
             t->ne[0] = (int64_t) 1 << 40;
             t->ne[1] = (int64_t) 1 << 40;
         }),
         2, "element count overflows int64"},
        {"model: a tensor type 99", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { tensor_named(r, "output_norm.weight")->type = 99; }), 2, "tensor 'output_norm.weight': unknown or removed ggml type 99"},
        {"model: a row not a whole number of blocks", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { tensor_named(r, "blk.0.attn_q.weight")->ne[0] = 33; }), 2,
         "ne[0] = 33 is not a multiple of the block size 32"},
        {"model: a tensor offset past the end", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { tensor_named(r, "output.weight")->offset = (uint64_t) 1 << 40; }), 2,
         "tensor 'output.weight': data [1099511629184, 1099511631284) ends past end of file"},
        {"model: a misaligned tensor offset", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { tensor_named(r, "output.weight")->offset += 1; }), 2, "tensor 'output.weight': offset 50433 is not a multiple of the alignment 32"},
        {"model: two tensors overlap", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { tensor_named(r, "output.weight")->offset = r.tensors[0].offset; }), 2,
         "overlaps or precedes tensor 'output_norm.weight'"},
        {"model: two tensors of one name", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { r.tensors[1].name = r.tensors[0].name; }), 2, "duplicate tensor name 'token_embd.weight'"},
        {"model: an empty tensor name", "inspect {bad}",
         model_with([](gguf_test::raw_file & r) { tensor_named(r, "output_norm.weight")->name = ""; }), 2, "has an empty name"},
        {"model: expert_count 0", "prune -m {bad} --plan {plan} -o {out}",
         model_with([](gguf_test::raw_file & r) { kv_named(r, "qwen3moe.expert_count")->value = gguf_test::u32_bytes(0); }), 2,
         "'qwen3moe.expert_count' is missing or < 1"},
        {"model: expert_count not the tensors' expert axis", "prune -m {bad} --plan {plan} -o {out}",
         model_with([](gguf_test::raw_file & r) { kv_named(r, "qwen3moe.expert_count")->value = gguf_test::u32_bytes(8); }), 2,
         "expected n_expert = 8 in ne[1]"},
        {"model: expert_count of type string", "prune -m {bad} --plan {plan} -o {out}",
         model_with([](gguf_test::raw_file & r) {
             gguf_test::raw_kv * k = kv_named(r, "qwen3moe.expert_count");
             k->type = 8;
             k->value = gguf_test::string_bytes("4");
         }),
         2, "key 'qwen3moe.expert_count' has type string"},
        {"model: a directory", "inspect {bad}", [](const inputs &, const std::string & bad) { ::mkdir(bad.c_str(), 0755); }, 2,
         "not a regular file"},
        {"model: a missing file", "inspect {bad}", [](const inputs &, const std::string &) {}, 2, "{bad}: cannot open: No such file or directory"},
        {"model: first shard of a set whose second is missing", "inspect {bad}/set-00001-of-00003.gguf",
         [](const inputs & in, const std::string & bad) {
             // a real three-shard set, then its second shard removed
             ::mkdir(bad.c_str(), 0755);
             g::model m;
             std::string err;
             if (!g::open_model(in.model, m, err)) ADD_FAILURE() << err;
             g::write_options wo;
             wo.sync = false;
             wo.split_max_tensors = 4;
             std::vector<std::string> written;
             if (!g::write_output(g::spec_from_model(m), wo, bad + "/set.gguf", written, err)) ADD_FAILURE() << err;
             ::unlink((bad + "/set-00002-of-00003.gguf").c_str());
         },
         2, "shard 2 of 3: {bad}/set-00002-of-00003.gguf: cannot open"},
        // ---- plans (prune --plan) ----
        {"plan: empty file", "prune -m {model} --plan {bad} -o {out}", text([](const inputs &) { return ""; }), 2, "plan {bad}: not valid JSON"},
        {"plan: not JSON", "prune -m {model} --plan {bad} -o {out}", text([](const inputs &) { return "keep: 1, 2\n"; }), 2,
         "not valid JSON"},
        {"plan: a JSON array", "prune -m {model} --plan {bad} -o {out}", text([](const inputs &) { return "[1, 2]\n"; }), 2,
         "top level must be an object, not array"},
        {"plan: cut in the middle", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return in.plan_text.substr(0, in.plan_text.size() / 2); }), 2, "not valid JSON"},
        {"plan: another format", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return plan_with(in, "\"reap-plan\"", "\"reap-plot\""); }), 2, "\"format\" must be \"reap-plan\", got \"reap-plot\""},
        {"plan: version 4", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return plan_with(in, "\"version\": 1", "\"version\": 4"); }), 2, "unsupported version 4"},
        {"plan: a number too large for a double", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return plan_with(in, "\"version\": 1", "\"version\": 1e99999"); }), 2,
         "plan {bad}: not valid JSON at line 3, column 20: number overflow parsing '1e99999'"},
        {"plan: an expert id out of range", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return first_id(in, "7"); }), 2, "layer 0: expert 7 (keep[0]) out of range [0, 4)"},
        {"plan: a negative expert id", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return first_id(in, "-1"); }), 2, "layer 0: expert -1 (keep[0]) out of range [0, 4)"},
        {"plan: an expert id of 1e30", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return first_id(in, "1e30"); }), 2, "keep[0] must be an integer, not number"},
        {"plan: an expert id as a string", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return first_id(in, "\"1\""); }), 2, "keep[0] must be an integer, not string"},
        {"plan: an expert kept twice", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return first_id(in, std::to_string(second_id(in))); }), 2, "listed twice"},
        {"plan: a MoE layer missing", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return plan_with(in, "\"layer\": 0", "\"layer\": 5"); }), 2, "layers[0].layer = 5 out of range [0, 0]"},
        {"plan: n_keep below expert_used_count", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return plan_with(in, "\"n_keep\": 2", "\"n_keep\": 1"); }), 2, "keeps 2 experts, n_keep is 1"},
        {"plan: ill-formed UTF-8", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs & in) { return plan_with(in, "\"reap-plan\"", "\"reap-\xff\xfeplan\""); }), 2, "ill-formed UTF-8 byte"},
        {"plan: 100000 nested arrays", "prune -m {model} --plan {bad} -o {out}",
         text([](const inputs &) { return std::string(100000, '[') + std::string(100000, ']'); }), 2, "top level must be an object, not array"},
        // ---- saliency archives (plan, merge) ----
        {"archive: a model given as the archive", "plan {model} -m {model} --keep 2 -o {out}", [](const inputs &, const std::string &) {},
         2, "no general.type: not a saliency archive"},
        {"archive: cut in half", "plan {bad} -m {model} --keep 2 -o {out}",
         file([](const inputs & in) {
             const b a = gguf_test::read_all(in.sal);
             return first_bytes(a, a.size() / 2);
         }),
         2, "cannot read saliency archive: {bad}"},
        {"archive: another model's", "plan {bad} -m {model} --keep 2 -o {out}",
         [](const inputs & in, const std::string & bad) {
             g::model m;
             std::string err;
             gguf_test::model_options o;
             o.n_expert = 8;
             o.n_layer = 1;
             gguf_test::write_model(in.dir + "/other-model.gguf", o);
             g::open_model(in.dir + "/other-model.gguf", m, err);
             s::fingerprint fp;
             s::model_fingerprint(m, fp, err);
             s::archive a = s::make_archive(fp, s::metric_set::reap);
             saliency_test::simulate_domain(a, "en", saliency_test::sim_options{});
             if (!s::write_archive(a, bad, err, true)) ADD_FAILURE() << err;
         },
         2, "saliency archive is for another model: n_expert 8 (archive) vs 4 (model)"},
        {"archive: given twice to merge", "merge {sal} {sal} -o {out}", [](const inputs &, const std::string &) {}, 2, "both hold the archive"},
        {"archive: channel tensors of another width than n_ff_exp", "plan {bad} -m {model} --keep 2 -o {out}",
         [](const inputs & in, const std::string & bad) {
             s::archive a;
             g::output_spec spec;
             std::vector<std::string> written;
             std::string err;
             if (!s::read_archive(in.sal, a, err)) ADD_FAILURE() << err;
             saliency_test::add_channels(a, 4);
             if (!s::archive_spec(a, spec, err)) ADD_FAILURE() << err;
             spec.kvs.set_u32(s::k_key_n_ff, 5);
             if (!g::write_output(spec, g::write_options{}, bad, written, err)) ADD_FAILURE() << err;
         },
         2, "tensor 'en.ch_energy' has shape [4, 4, 1], expected [5, 4, 1] (n_ff_exp, n_expert, n_layer)"},
        {"archive: shared-expert channel tensors it does not declare", "plan {bad} -m {model} --keep 2 -o {out}",
         [](const inputs & in, const std::string & bad) {
             s::archive a;
             g::output_spec spec;
             std::vector<std::string> written;
             std::string err;
             if (!s::read_archive(in.sal, a, err)) ADD_FAILURE() << err;
             saliency_test::add_channels(a, 4);
             saliency_test::add_shared_channels(a);
             if (!s::archive_spec(a, spec, err)) ADD_FAILURE() << err;
             spec.kvs.remove(s::k_key_shared_channels);   // as a version 2 archive would be
             spec.kvs.set_u32(s::k_key_version, 2);
             if (!g::write_output(spec, g::write_options{}, bad, written, err)) ADD_FAILURE() << err;
         },
         2, "tensor 'en.sh_energy' is not expected: the archive declares no shared expert channel statistics"},
        {"archive: merged with one that has channel statistics", "merge {sal} {bad} -o {out}",
         [](const inputs & in, const std::string & bad) {
             s::archive a;
             std::string err;
             if (!s::read_archive(in.sal, a, err)) ADD_FAILURE() << err;
             saliency_test::add_channels(a, 4);
             if (!s::write_archive(a, bad, err, true)) ADD_FAILURE() << err;
         },
         2, "different channel statistics: n_ff_exp 0 vs 4"},
        // ---- imatrix (prune --imatrix, reap imatrix) ----
        {"imatrix: a model given as the imatrix", "prune -m {model} --plan {plan} --imatrix {model} -o {out}",
         [](const inputs &, const std::string &) {}, 2, "is neither <weight>.in_sum2 nor <weight>.counts (is this an imatrix file?)"},
        {"imatrix: legacy .dat with 2^31-1 entries", "prune -m {model} --plan {plan} --imatrix {bad} -o {out}",
         file([](const inputs &) { return legacy_dat(0x7fffffff, 4, "blk.", 4); }), 2, "entry count 2147483647 is impossible"},
        {"imatrix: legacy .dat with a negative name length", "prune -m {model} --plan {plan} --imatrix {bad} -o {out}",
         file([](const inputs &) {
             b x = legacy_dat(1, -5, "", 4);
             x.resize(x.size() + 64, 0);   // room enough that the entry count is possible
             return x;
         }),
         2, "name length -5 out of range"},
        {"imatrix: legacy .dat cut in its values", "prune -m {model} --plan {plan} --imatrix {bad} -o {out}",
         file([](const inputs &) { return legacy_dat(1, 26, "blk.0.ffn_down_exps.weight", 128); }), 2, "128 values but 0 bytes left"},
        // ---- eval records and sweeps (report --eval, --sweep) ----
        {"eval record: not JSON", "report -m {model} --plan {plan} --eval {bad} {cut} -o {out}",
         text([](const inputs &) { return "KLD 0.1\n"; }), 2, "eval '{bad}': not valid JSON at line 1, column 1: syntax error while parsing value - invalid literal"},
        {"eval record: a number too large for a double", "report -m {model} --plan {plan} --eval {bad} {cut} -o {out}",
         text([](const inputs &) { return "{\n  \"format\": \"reap-eval\",\n  \"kld_mean\": 1e99999\n}\n"; }), 2,
         "eval '{bad}': not valid JSON at line 3, column 21: number overflow parsing '1e99999'"},
        {"sweep: a number too large for a double", "report -m {model} --plan {plan} --sweep {bad} {cut} -o {out}",
         text([](const inputs &) { return "{\n  \"format\": \"reap-sweep\",\n  \"points\": [{\"kld_mean\": 1e99999}]\n}\n"; }), 2,
         "sweep '{bad}': not valid JSON at line 3, column 33: number overflow parsing '1e99999'"},
        {"eval record: JSON of another format", "report -m {model} --plan {plan} --eval {bad} {cut} -o {out}",
         text([](const inputs &) { return "{\"format\": \"reap-eval\", \"version\": 1, \"kld\": {\"mean\": -1}}\n"; }), 2,
         "is not a reap eval report (no kld_mean"},
        // ---- paths ----
        {"output: in a missing folder", "prune -m {model} --plan {plan} -o {bad}/x/cut.gguf", [](const inputs &, const std::string &) {},
         2, "cannot create a temp file beside {bad}/x/cut.gguf: No such file or directory"},
        {"output: an existing folder", "prune -m {model} --plan {plan} --force -o {bad}",
         [](const inputs &, const std::string & bad) { ::mkdir(bad.c_str(), 0755); }, 2, "{bad} exists and is not a regular file"},
        {"output: the model itself", "prune -m {model} --plan {plan} --force -o {model}", [](const inputs &, const std::string &) {}, 2,
         "over the model file"},
        {"output: the archive itself", "plan {sal} -m {model} --keep 2 --force -o {sal}", [](const inputs &, const std::string &) {}, 2,
         "over the saliency archive"},
        {"output: a hard link to the model", "prune -m {model} --plan {plan} --force -o {bad}",
         [](const inputs & in, const std::string & bad) { ::link(in.model.c_str(), bad.c_str()); }, 2, "refusing to write {bad} over the model file"},
        {"output: named SHA256SUMS", "prune -m {model} --plan {plan} -o {bad}/SHA256SUMS",
         [](const inputs &, const std::string & bad) { ::mkdir(bad.c_str(), 0755); }, 2, "SHA256SUMS is the name of the checksum file of its folder"},
        {"option: --split-max-size 0", "prune -m {model} --plan {plan} --split-max-size 0 -o {out}",
         [](const inputs &, const std::string &) {}, 2, "--split-max-size: '0' is not a positive size"},
        {"option: --keep -3", "plan {sal} -m {model} --keep -3 -o {out}", [](const inputs &, const std::string &) {}, 2, "--keep: '-3' is not a positive integer"},
        {"option: an unknown option", "prune -m {model} --plan {plan} --frobnicate -o {out}",
         [](const inputs &, const std::string &) {}, 2, "unknown option --frobnicate"},
    };
    return table;
}

std::string replace_all(std::string s, const std::string & from, const std::string & to) {
    for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
    return s;
}

// The table as docs/reliability.md holds it (Markdown; a pipe in a cell escaped).
std::string markdown_table() {
    auto cell = [](const std::string & t) { return replace_all(t, "|", "\\|"); };
    std::string md = "| input | command | exit | message holds |\n|---|---|---|---|\n";
    for (const hostile_case & c : cases()) {
        md += "| " + cell(c.input) + " | `reap " + cell(c.args) + "` | " + std::to_string(c.exit_code) + " | " +
              cell(c.message) + " |\n";
    }
    return md;
}

inputs make_inputs() {
    inputs in;
    in.dir = gguf_test::scratch_dir("hostile");
    std::string out, err;
    prune_test::run("rm -rf " + quote(in.dir) + " && mkdir -p " + quote(in.dir), out);
    in.model = in.dir + "/model.gguf";
    gguf_test::model_options o;
    o.n_layer = 1;   // one MoE block (qwen3moe has no dense ones)
    gguf_test::write_model(in.model, o);
    in.model_bytes = gguf_test::read_all(in.model);
    g::model m;
    if (!g::open_model(in.model, m, err)) ADD_FAILURE() << err;
    reap::plan p;
    if (!prune_test::random_plan(m, 2, 5, p, err)) ADD_FAILURE() << err;
    in.plan = in.dir + "/plan.json";
    if (!reap::write_plan(p, in.plan, true, err)) ADD_FAILURE() << err;
    const std::vector<uint8_t> pt = gguf_test::read_all(in.plan);
    in.plan_text.assign(pt.begin(), pt.end());
    s::fingerprint fp;
    if (!s::model_fingerprint(m, fp, err)) ADD_FAILURE() << err;
    s::archive a = s::make_archive(fp, s::metric_set::reap);
    saliency_test::simulate_domain(a, "en", saliency_test::sim_options{});
    in.sal = in.dir + "/sal.gguf";
    if (!s::write_archive(a, in.sal, err, true)) ADD_FAILURE() << err;
    in.cut = in.dir + "/cut.gguf";
    if (prune_test::run(quote(gguf_test::reap_bin()) + " prune -m " + quote(in.model) + " --plan " + quote(in.plan) + " -o " +
                        quote(in.cut), out) != 0) {
        ADD_FAILURE() << out;
    }
    return in;
}

} // namespace

TEST(HostileInputs, EachExitsTwoNamingWhatIsWrong) {
    const std::string bin = gguf_test::reap_bin();
    ASSERT_TRUE(gguf_test::exists(bin)) << "no reap binary at " << bin;
    const inputs in = make_inputs();
    ASSERT_FALSE(HasFailure());
    int n = 0, held = 0;
    for (const hostile_case & c : cases()) {
        const std::string bad = in.dir + "/bad-" + std::to_string(n), outp = in.dir + "/out-" + std::to_string(n);
        ++n;
        c.make(in, bad);
        std::string args = c.args;
        for (const auto & [k, v] : std::vector<std::pair<std::string, std::string>>{
                 {"{bad}", bad}, {"{model}", in.model}, {"{plan}", in.plan}, {"{sal}", in.sal}, {"{cut}", in.cut}, {"{out}", outp}}) {
            args = replace_all(args, k, quote(v));
        }
        std::string out;
        const int rc = prune_test::run(quote(bin) + " " + args, out);
        const std::string want = replace_all(c.message, "{bad}", bad);
        const bool ok = rc == c.exit_code && out.find(want) != std::string::npos;
        held += ok;
        if (const char * v = std::getenv("REAP_HOSTILE_VERBOSE"); v && std::string(v) == "1") {
            std::string said;   // the error: the line of reap's that is not a warning
            std::istringstream lines(out);
            for (std::string l; std::getline(lines, l);) {
                if (l.rfind("reap ", 0) == 0 && l.find(": warning: ") == std::string::npos) said = l;
            }
            printf("%s: exit %d: %s\n", c.input, rc, said.c_str());
        }
        EXPECT_TRUE(ok) << c.input << ": reap " << args << "\n  exit " << rc << " (want " << c.exit_code << "), message should hold '"
                        << want << "':\n" << out;
    }
    printf("%d of %d hostile inputs held\n", held, n);
    RecordProperty("held", held);
    // the inputs the rows started from are intact
    EXPECT_EQ(gguf_test::read_all(in.model), in.model_bytes);
}

TEST(HostileInputs, DocsHoldTheTable) {
    const std::string md = markdown_table();
    if (const char * p = std::getenv("REAP_PRINT_HOSTILE_TABLE"); p && std::string(p) == "1") printf("%s", md.c_str());
    const std::string docs = gguf_test::env_or("REAP_SOURCE_DIR", REAP_SOURCE_DIR) + "/docs/reliability.md";
    const std::vector<uint8_t> d = gguf_test::read_all(docs);
    const std::string text(d.begin(), d.end());
    const std::string begin = "<!-- hostile-table: begin (tests/test_cli_hostile_inputs.cpp) -->\n", end = "<!-- hostile-table: end -->";
    const size_t a = text.find(begin), z = text.find(end);
    ASSERT_NE(a, std::string::npos) << docs << " lacks " << begin;
    ASSERT_NE(z, std::string::npos) << docs << " lacks " << end;
    EXPECT_EQ(text.substr(a + begin.size(), z - a - begin.size()), md)
        << "docs/reliability.md's hostile table differs from the test's; REAP_PRINT_HOSTILE_TABLE=1 prints the test's";
}
