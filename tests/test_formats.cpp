// The file formats of src/formats/ (eval report, sweep) and the plan
// provenance the model card reads (src/plan/provenance.h), in-process:
//   * every field written reads back (to_json -> text -> from_json -> to_json
//     is the same document; maps of domains read back in name order);
//   * files written by the versions before the formats were named (fixtures
//     under tests/fixtures/formats/: sweeps written by `reap sweep` and eval
//     reports by `reap eval` at version 1, only their path values shortened)
//     still read, each number equal to the one in the file as nlohmann reads
//     it directly;
//   * each malformed field is refused with a message naming that field
//     (a table: the field, the bad value, the words expected);
//   * a file that is not JSON, a number too large for a double included, is
//     refused naming the file and the line.
#include "formats/behaviour_file.h"
#include "formats/eval_file.h"
#include "formats/fit_file.h"
#include "formats/kld_receipt.h"
#include "formats/sweep_file.h"
#include "gguf_test_util.h"
#include "plan/provenance.h"
#include "util/json_fields.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace {

using nlohmann::json;

std::string fixture(const std::string & name) {
    const char * src = getenv("REAP_SOURCE_DIR");
    return std::string(src ? src : REAP_SOURCE_DIR) + "/tests/fixtures/formats/" + name;
}

json read_json(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return json::parse(ss.str());
}

const std::string k_sha_a(64, 'a'), k_sha_b(64, 'b'), k_sha_c(64, 'c');

reap::eval_metrics metrics(double kld, size_t n) {
    reap::eval_metrics m;
    m.n_tokens = n;
    m.ppl_base = 10.5;
    m.ppl_pruned = 11.25;
    m.ppl_ratio = 11.25 / 10.5;
    m.kld_mean = kld;
    m.kld_median = kld / 2;
    m.kld_p99 = kld * 4;
    m.kld_max = kld * 8;
    m.argmax_agree = 0.875;
    return m;
}

// A report with every field set.
reap::eval_report full_report() {
    reap::eval_report r;
    r.n_batch = 1024;
    r.n_ubatch = 512;
    r.overall = metrics(0.1375, 1000);   // the domains' rows, token-weighted: (600 x 0.0625 + 400 x 0.25) / 1000
    r.domains = {{"en", metrics(0.0625, 600)}, {"ja", metrics(0.25, 400)}, {"empty", reap::eval_metrics{}}};
    r.domains[2].second.ppl_base = 0;
    r.pruned_scored = true;
    r.corpus = true;
    r.n_ctx = 256;
    r.n_windows = 17;
    r.n_samples = 9;
    r.n_samples_skipped = 1;
    r.kld_base_mode = "written";
    r.candidate = "cut.gguf";
    r.base_mask = "mask.json";
    r.base_mask_sha256 = k_sha_a;
    r.base_path = "base.gguf";
    r.base_sha256 = k_sha_b;
    r.input_path = "heldout.jsonl";
    r.input_sha256 = k_sha_c;
    r.candidate_files = {{"cut-00001-of-00002.gguf", 123, k_sha_a}, {"cut-00002-of-00002.gguf", 456, ""}};
    r.mtp_blocks = 1;
    r.mtp_base = reap::eval_report::mtp_acceptance{640, 320};
    r.mtp_pruned = reap::eval_report::mtp_acceptance{640, 300};
    r.mtp_note = "a note";
    r.warnings = {"mask.json records no model fingerprint"};
    return r;
}

std::string eval_text(const reap::eval_report & r) { return reap::eval_report_to_json(r).dump(2); }

TEST(EvalFormat, EveryFieldReadsBack) {
    const reap::eval_report r = full_report();
    reap::eval_document d;
    std::string err;
    ASSERT_TRUE(reap::eval_document_from_json(json::parse(eval_text(r)), "r.json", d, err)) << err;
    ASSERT_EQ(d.entries.size(), 1u);
    EXPECT_TRUE(d.single);
    EXPECT_EQ(d.version, reap::k_eval_version);
    // the same document (a domain map reads back in name order: compared as JSON objects)
    EXPECT_EQ(json::parse(eval_text(d.entries[0].report)), json::parse(eval_text(r)));
    EXPECT_TRUE(d.entries[0].report.base_masked());
    EXPECT_EQ(d.entries[0].report.base_sha256, k_sha_b);
    EXPECT_EQ(json::parse(eval_text(r))["reference"], "masked_base");

    // several reports: a pruned file and a mask
    reap::eval_report m = full_report();
    m.masked = true;
    m.candidate = "plan.json";
    m.candidate_files.clear();
    m.candidate_sha256 = k_sha_c;
    reap::eval_document several;
    several.entries = {{"cut.gguf", false, r}, {"plan.json", true, m}};
    const std::string text = reap::eval_document_to_json(several).dump(2);
    ASSERT_TRUE(reap::eval_document_from_json(json::parse(text), "s.json", d, err)) << err;
    EXPECT_FALSE(d.single);
    EXPECT_EQ(json::parse(reap::eval_document_to_json(d).dump(2)), json::parse(text));
}

// Version-1 reports as `reap eval --json` wrote them before the format was
// named: one -p; a -p and a --mask; a --mask with --base-mask.
TEST(EvalFormat, Version1FilesStillRead) {
    for (const char * name : {"eval-v1.json", "eval-v1-several.json", "eval-v1-base-mask.json"}) {
        SCOPED_TRACE(name);
        const json raw = read_json(fixture(name));
        reap::eval_document d;
        std::string err;
        ASSERT_TRUE(reap::eval_document_from_json(raw, name, d, err)) << err;
        EXPECT_EQ(d.version, 1);
        ASSERT_FALSE(d.entries.empty());
        for (const auto & e : d.entries) {
            const json & r = d.single ? raw : raw[e.masked ? "masked" : "pruned"][e.key];
            EXPECT_EQ(e.report.overall.kld_mean, r["kld_mean"].get<double>());
            EXPECT_EQ(e.report.overall.argmax_agree, r["argmax_agree"].get<double>());
            EXPECT_EQ(e.report.overall.n_tokens, r["n_tokens"].get<size_t>());
            EXPECT_EQ(e.report.n_windows, r["n_windows"].get<size_t>());
            EXPECT_EQ(e.report.input_sha256, r["input"]["sha256"].get<std::string>());
            EXPECT_EQ(e.report.base_mask, r.value("base_mask", std::string()));
            EXPECT_TRUE(e.report.base_sha256.empty());   // version 1 does not record the base
            EXPECT_EQ(e.report.masked, e.masked);
            if (e.masked) EXPECT_EQ(e.report.candidate_sha256, r["candidate_sha256"].get<std::string>());
            if (!e.masked) {
                ASSERT_EQ(e.report.candidate_files.size(), r["candidate_files"].size());
                EXPECT_EQ(e.report.candidate_files[0].bytes, r["candidate_files"][0]["bytes"].get<uint64_t>());
            }
        }
    }
}

// One field at a time made wrong in a valid document: refused, the message naming the field.
TEST(EvalFormat, EachMalformedFieldIsRefusedByName) {
    const json good = json::parse(eval_text(full_report()));
    struct bad_case { std::string pointer; json value; std::string words; };
    const std::vector<bad_case> cases = {
        {"/kld_mean", -1.0, "kld_mean"},
        {"/kld_mean", "0.1", "kld_mean must be a number"},
        {"/argmax_agree", 2.5, "argmax_agree"},
        {"/n_tokens", 18446744073709551615ull, "n_tokens"},
        {"/n_tokens", -5, "n_tokens must be a whole number"},
        {"/n_tokens", 0, "n_tokens is 0"},
        {"/ppl_base", -1.0, "ppl_base"},
        {"/ppl_ratio", nullptr, "ppl_ratio is missing"},
        {"/kld_max", 0.01, "kld_max is below"},
        {"/kld_p99", 99.0, "kld_p99 is not between kld_median and kld_max"},
        {"/kld_p99", 0.01, "kld_p99 is not between kld_median and kld_max"},
        {"/ppl_ratio", 0.01, "ppl_ratio is 0.01 but ppl_pruned / ppl_base is 1.07143"},
        {"/ppl_base", 0.0, "ppl_base is below 1 over 1000 tokens"},
        {"/ppl_pruned", 0.5, "ppl_pruned is below 1"},
        {"/domains/en/n_tokens", 601, "domains count 1001 tokens (up to \"ja\"), more than the 1000 of n_tokens"},
        {"/domains/en/kld_p99", true, "domains.\"en\".kld_p99"},
        {"/domains/en", 3, "domains.\"en\" must be an object"},
        {"/n_ctx", -1, "n_ctx"},
        {"/n_windows", 1.5, "n_windows"},
        {"/corpus", "yes", "corpus must be true or false"},
        {"/kld_base", "maybe", "kld_base must be"},
        {"/reference", "base", "reference says \"base\" but base_mask is set"},
        {"/reference", "elsewhere", "reference must be"},
        {"/base/header_sha256", "abc", "base.header_sha256 must be a SHA-256"},
        {"/base", "base.gguf", "base must be an object"},
        {"/base_mask_sha256", std::string(64, 'G'), "base_mask_sha256"},
        {"/candidate_sha256", 7, "candidate_sha256 must be a string"},
        {"/input/sha256", nullptr, "input.sha256 is missing"},
        {"/candidate_files/0/bytes", -3, "candidate_files[0].bytes"},
        {"/candidate_files/1/sha256", "nothex", "candidate_files[1].sha256"},
        {"/candidate_files", json::object(), "candidate_files must be an array"},
        {"/mtp_draft/base_accepted", 641, "mtp_draft.base_accepted"},
        {"/mtp_draft/blocks", 0, "mtp_draft.blocks"},
        {"/warnings/0", 1, "warnings[0]"},
        {"/format", "reap-plan", "not a reap eval report"},
        {"/version", 3, "version"},
        {"/version", nullptr, "version is missing"},
    };
    for (const auto & c : cases) {
        json j = good;
        if (c.value.is_null() && c.pointer != "/version") {
            j[json::json_pointer(c.pointer).parent_pointer()].erase(json::json_pointer(c.pointer).back());
        } else if (c.value.is_null()) {
            j.erase("version");
        } else {
            j[json::json_pointer(c.pointer)] = c.value;
        }
        reap::eval_document d;
        std::string err;
        EXPECT_FALSE(reap::eval_document_from_json(j, "e.json", d, err)) << c.pointer << " = " << c.value.dump();
        EXPECT_NE(err.find(c.words), std::string::npos) << c.pointer << ": " << err;
        EXPECT_NE(err.find("eval 'e.json'"), std::string::npos) << err;
    }
    reap::eval_document d;
    std::string err;
    EXPECT_FALSE(reap::eval_document_from_json(json::array(), "e.json", d, err));
    EXPECT_FALSE(reap::eval_document_from_json(json{{"pruned", {{"a.gguf", 1}}}}, "e.json", d, err));
    EXPECT_NE(err.find("pruned.\"a.gguf\" must be an object"), std::string::npos) << err;
    json several = {{"format", "reap-eval"}, {"version", 2}, {"pruned", {{"a.gguf", good}}}};
    several["pruned"]["a.gguf"]["format"] = "reap-sweep";
    EXPECT_FALSE(reap::eval_document_from_json(several, "e.json", d, err));
    EXPECT_NE(err.find("pruned.\"a.gguf\".format is \"reap-sweep\""), std::string::npos) << err;
    EXPECT_FALSE(reap::eval_document_from_json(json{{"something", 1}}, "e.json", d, err));
    EXPECT_NE(err.find("not a reap eval report"), std::string::npos) << err;
}

reap::sweep_record full_sweep() {
    reap::sweep_record s;
    s.tool = "reap sweep test";
    s.model.path = "m.gguf";
    s.model.arch = "qwen3moe";
    s.model.header_sha256 = k_sha_a;
    s.model.n_expert = 32;
    s.model.n_expert_used = 4;
    s.model.moe_layers = 4;
    s.model.file_bytes = 4000;
    s.saliency = {"s.gguf", k_sha_b, "random", {"en", "ja"}};
    s.input.file = "t.jsonl";
    s.input.n_ctx = 128;
    s.input.n_windows = 5;
    s.input.corpus = true;
    s.mtp_base_acceptance = 0.5;
    for (int64_t n : {24, 16}) {
        reap::sweep_record_point q;
        q.n_keep = n;
        q.request_kind = "keep";
        q.request_text = std::to_string(n);
        q.removed_fraction = (32.0 - n) / 32.0;
        q.predicted_bytes = 100 * n;
        q.predicted_shards = 1;
        q.saliency_share = n / 40.0;
        q.safety_margin = n == 24 ? 9 : 0;
        q.safety_margin_median = n == 24 ? 11.5 : 0;
        q.plan = n == 24 ? "plans/keep-24.json" : "";
        q.overall = metrics(0.01 * (40 - n), 500);
        q.domains = {{"en", metrics(0.01 * (40 - n), 500)}, {"ja", reap::eval_metrics{}}};
        if (n == 24) q.mtp_acceptance = 0.25;
        s.points.push_back(q);
    }
    return s;
}

TEST(SweepFormat, EveryFieldReadsBack) {
    const std::string text = reap::sweep_to_json(full_sweep()).dump(2);
    reap::sweep_record s;
    std::string err;
    ASSERT_TRUE(reap::sweep_from_json(json::parse(text), "s.json", s, err)) << err;
    EXPECT_EQ(s.version, reap::k_sweep_version_one_source);   // one source: written as before
    EXPECT_EQ(json::parse(reap::sweep_to_json(s).dump(2)), json::parse(text));
    EXPECT_EQ(s.model.header_sha256, k_sha_a);
    EXPECT_EQ(s.saliency.method, "random");
}

// Width cuts (reap sweep --widths): a point's "width" reads back, two points
// of one N at different widths are two points, the same (N, width) twice is
// refused, and a width out of range is refused naming the field.
TEST(SweepFormat, WidthPointsReadBack) {
    reap::sweep_record s = full_sweep();
    reap::sweep_record_point w = s.points[1];
    w.width = 64;
    w.predicted_bytes = 900;
    s.points.push_back(w);
    const json j = reap::sweep_to_json(s);
    EXPECT_FALSE(j["points"][1].contains("width"));
    EXPECT_EQ(j["points"][2]["width"], 64);
    reap::sweep_record r;
    std::string err;
    ASSERT_TRUE(reap::sweep_from_json(j, "s.json", r, err)) << err;
    ASSERT_EQ(r.points.size(), 3u);
    EXPECT_EQ(r.points[1].width, 0);
    EXPECT_EQ(r.points[2].width, 64);
    EXPECT_EQ(r.points[2].n_keep, 16);
    EXPECT_TRUE(reap::sweep_has_widths(r));
    EXPECT_FALSE(reap::sweep_has_widths(full_sweep()));
    EXPECT_EQ(reap::sweep_point_name(16, 64), "keep 16 width 64");
    EXPECT_EQ(reap::sweep_point_name(16), "keep 16");
    json twice = j;
    twice["points"].push_back(j["points"][2]);
    EXPECT_FALSE(reap::sweep_from_json(twice, "s.json", r, err));
    EXPECT_NE(err.find("= 16 at width 64 is scored twice"), std::string::npos) << err;
    json bad = j;
    bad["points"][2]["width"] = 0;
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("width"), std::string::npos) << err;
}

// Issue 25 item 3: a sweep with --needle / --generate keeps both sections
// (every text and token) and each point's numbers; it reads back field for
// field, and a point whose stated numbers are not its model's texts' and
// tokens' is refused, naming the field.
TEST(SweepFormat, BehaviourSectionsReadBackAndPointsAreRecomputed) {
    reap::sweep_record s = full_sweep();
    reap::needle_section n;
    n.report.seed = 5;
    n.report.haystack_path = "t.jsonl";
    n.report.cells = reap::needle_cells({64}, {0.5}, 2, 5);
    n.measured.input_path = "t.jsonl";
    n.measured.input_sha256 = k_sha_a;
    n.measured.base_path = "m.gguf";
    n.measured.base_sha256 = k_sha_b;
    reap::generate_section g;
    g.report.prompts_path = "p.jsonl";
    g.report.max_new = 30;
    g.report.domains = {"en"};
    g.report.prompt_domain = {0, 0};
    g.report.prompt_line = {1, 2};
    for (const std::string name : {"base", "keep 24", "keep 16"}) {
        reap::needle_model m{name, name != "base", {}};
        for (const auto & cell : n.report.cells) m.answers.push_back({name == "keep 16" ? "nope" : " " + cell.value, name != "keep 16"});
        n.report.models.push_back(m);
        reap::generation_model gm;
        gm.name = name;
        gm.masked = name != "base";
        std::vector<int32_t> t = {1, 2, 3, 4, 5};
        if (name == "keep 16") t = std::vector<int32_t>(24, 7);   // one token 24 times: a loop
        gm.outputs = {{t, true}, {{1, 2}, false}};
        gm.texts = {"a", "b"};
        g.report.models.push_back(gm);
        if (name == "base") continue;
        n.measured.candidates.push_back({name, true, 100, k_sha_a, {}});
    }
    g.measured = n.measured;
    g.measured.input_path = "p.jsonl";
    s.needle = n;
    s.generate = g;
    const json j = json::parse(reap::sweep_to_json(s).dump(2));
    EXPECT_EQ(j.at("points")[0].at("needle").at("n_exact"), 2);
    EXPECT_EQ(j.at("points")[1].at("needle").at("n_exact"), 0);
    EXPECT_EQ(j.at("points")[1].at("generate").at("loop_rate"), 0.5);   // 1 of 2 outputs: 7 x 24
    EXPECT_EQ(j.at("points")[1].at("generate").at("mean_agreement"), 1.0);   // 0 and 2 tokens agree
    reap::sweep_record r;
    std::string err;
    ASSERT_TRUE(reap::sweep_from_json(j, "s.json", r, err)) << err;
    EXPECT_EQ(json::parse(reap::sweep_to_json(r).dump(2)), j);
    ASSERT_TRUE(r.needle && r.generate);
    EXPECT_EQ(r.generate->measured.candidates[1].plan_sha256, k_sha_a);

    json bad = j;
    bad["points"][1]["needle"]["n_exact"] = 1;
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("points[1].needle.n_exact"), std::string::npos) << err;
    bad = j;
    bad["points"][0]["generate"]["distinct_4"] = 0.25;
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("points[0].generate.distinct_4"), std::string::npos) << err;
    bad = j;
    bad["needle"]["cells"][0]["models"][2]["text"] = bad["needle"]["cells"][0]["value"];   // now exact, yet "match": false
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("needle.cells[0].models[2].match"), std::string::npos) << err;
    bad = j;
    bad["generate"]["models"][2]["name"] = "keep 15";
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("keep 16"), std::string::npos) << err;
    // a width cut beside the sections: they name "keep 16" only, so its numbers would be the full width's
    bad = j;
    bad["points"][1]["width"] = 64;
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("needle is beside width cuts"), std::string::npos) << err;
}

// Issue 26 item 2: several sources against one reference (version 3). The
// frontier names, per request, the source with the lowest KLD mean and the
// margin to the next; a file whose frontier is not what its sources give is refused.
TEST(SweepFormat, SourcesAndFrontierReadBack) {
    reap::sweep_record s = full_sweep();
    s.reference.kld_base = "ref.kld";
    for (const char * path : {"q8.gguf", "q4.gguf"}) {
        reap::sweep_source src;
        src.path = path;
        src.header_sha256 = k_sha_a;
        src.router_sha256 = k_sha_a;
        src.file_bytes = 1000;
        src.points = s.points;
        s.sources.push_back(src);
    }
    // q4 is better at the first request, q8 at the second
    s.sources[1].points[0].overall.kld_mean = s.sources[0].points[0].overall.kld_mean / 2;
    s.sources[1].points[1].overall.kld_mean += 0.25;
    for (int i : {0, 1}) s.sources[1].points[i].domains[0].second.kld_mean = s.sources[1].points[i].overall.kld_mean;   // its one domain
    const json j = json::parse(reap::sweep_to_json(s).dump(2));
    EXPECT_EQ(j.at("version"), 3);
    ASSERT_EQ(j.at("frontier").size(), s.points.size());
    EXPECT_EQ(j["frontier"][0]["best"]["source"], "q4.gguf");
    EXPECT_EQ(j["frontier"][0]["runner_up"]["source"], "q8.gguf");
    EXPECT_DOUBLE_EQ(j["frontier"][0]["kld_margin"].get<double>(), s.sources[0].points[0].overall.kld_mean / 2);
    EXPECT_EQ(j["frontier"][1]["best"]["source"], "q8.gguf");
    EXPECT_NEAR(j["frontier"][1]["kld_margin"].get<double>(), 0.25, 1e-12);
    reap::sweep_record r;
    std::string err;
    ASSERT_TRUE(reap::sweep_from_json(j, "s.json", r, err)) << err;
    EXPECT_EQ(r.version, 3);
    ASSERT_EQ(r.sources.size(), 2u);
    EXPECT_EQ(r.reference.kld_base, "ref.kld");
    EXPECT_EQ(r.frontier[0].best.source, 1u);
    EXPECT_EQ(r.frontier[1].best.source, 0u);
    EXPECT_EQ(json::parse(reap::sweep_to_json(r).dump(2)), j);
    json bad = j;
    bad["frontier"][0]["best"]["source"] = "q8.gguf";
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("is not the best point"), std::string::npos) << err;
    bad = j;
    bad.erase("reference");
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("reference"), std::string::npos) << err;
    // width cuts in a source: the frontier is per request, it would compare them with full-width points
    bad = j;
    bad["sources"][1]["points"][1]["width"] = 64;
    EXPECT_FALSE(reap::sweep_from_json(bad, "s.json", r, err));
    EXPECT_NE(err.find("sources hold width cuts"), std::string::npos) << err;
}

// Sweeps written by `reap sweep` at version 1 (the trained model over a
// corpus; an MTP model over plain text).
TEST(SweepFormat, Version1FilesStillRead) {
    for (const char * name : {"sweep-v1.json", "sweep-v1-mtp.json"}) {
        SCOPED_TRACE(name);
        const json raw = read_json(fixture(name));
        reap::sweep_record s;
        std::string err;
        ASSERT_TRUE(reap::sweep_from_json(raw, name, s, err)) << err;
        EXPECT_EQ(s.version, 1);
        EXPECT_TRUE(s.model.header_sha256.empty());
        EXPECT_EQ(s.model.n_expert, raw["model"]["n_expert"].get<int64_t>());
        EXPECT_EQ(s.saliency.method, raw["saliency"]["method"].get<std::string>());
        ASSERT_EQ(s.points.size(), raw["points"].size());
        for (size_t i = 0; i < s.points.size(); ++i) {
            const json & q = raw["points"][i];
            EXPECT_EQ(s.points[i].n_keep, q["n_keep"].get<int64_t>());
            EXPECT_EQ(s.points[i].predicted_bytes, q["predicted_bytes"].get<uint64_t>());
            EXPECT_EQ(s.points[i].overall.kld_mean, q["overall"]["kld_mean"].get<double>());
            EXPECT_EQ(s.points[i].domains.size(), q["domains"].size());
            EXPECT_EQ(s.points[i].request_text, q["request"].begin().value().get<std::string>());
        }
        EXPECT_EQ(s.mtp_base_acceptance.has_value(), raw.contains("mtp_base_acceptance"));
    }
}

TEST(SweepFormat, EachMalformedFieldIsRefusedByName) {
    const json good = json::parse(reap::sweep_to_json(full_sweep()).dump());
    struct bad_case { std::string pointer; json value; std::string words; };
    const std::vector<bad_case> cases = {
        {"/format", "reap-eval", "not a reap sweep"},
        {"/version", 0, "version"},
        {"/model/n_expert", 0, "model.n_expert"},
        {"/model/n_expert_used", 33, "model.n_expert_used"},
        {"/model/header_sha256", "", "model.header_sha256 must be a SHA-256"},
        {"/model/file_bytes", -1, "model.file_bytes"},
        {"/saliency/method", "bogus", "saliency.method"},
        {"/saliency/sha256", 5, "saliency.sha256"},
        {"/saliency/domains/1", 2, "saliency.domains[1]"},
        {"/input/n_ctx", "128", "input.n_ctx"},
        {"/points/0/n_keep", 33, "points[0].n_keep"},
        {"/points/1/n_keep", 24, "points[1].n_keep = 24 is scored twice"},
        {"/points/0/saliency_share", 1.5, "points[0].saliency_share"},
        {"/points/0/removed_fraction", -0.5, "points[0].removed_fraction"},
        {"/points/0/predicted_shards", 0, "points[0].predicted_shards"},
        {"/points/0/safety_margin", 40, "points[0].safety_margin"},
        {"/points/0/request", json{{"keep", "24"}, {"ratio", "0.25"}}, "points[0].request"},
        {"/points/0/request", json{{"keep", 24}}, "points[0].request"},
        {"/points/0/overall/kld_mean", -1.0, "points[0].overall.kld_mean"},
        {"/points/0/overall/argmax_agree", 2.5, "points[0].overall.argmax_agree"},
        {"/points/1/domains/en/n_tokens", 1.5, "points[1].domains.\"en\".n_tokens"},
        {"/points/0/mtp_acceptance", 2, "points[0].mtp_acceptance"},
        {"/mtp_base_acceptance", -1, "mtp_base_acceptance"},   // -1 meant "not measured" in version 1 only
        {"/points", json::object(), "points must be an array"},
    };
    for (const auto & c : cases) {
        json j = good;
        j[json::json_pointer(c.pointer)] = c.value;
        reap::sweep_record s;
        std::string err;
        EXPECT_FALSE(reap::sweep_from_json(j, "w.json", s, err)) << c.pointer << " = " << c.value.dump();
        EXPECT_NE(err.find(c.words), std::string::npos) << c.pointer << ": " << err;
    }
    json j = good;
    j.erase("points");
    reap::sweep_record s;
    std::string err;
    EXPECT_FALSE(reap::sweep_from_json(j, "w.json", s, err));
    EXPECT_NE(err.find("points is missing"), std::string::npos) << err;
}

// reap plan and reap sweep record a plan's origin through one function: the
// same request gives the same provenance, whichever command asks.
TEST(PlanProvenance, OneRecordForPlanAndSweep) {
    reap::planner::plan_origin o;
    o.tool = "reap sweep";
    o.saliency_path = "s.gguf";
    o.saliency_sha256 = k_sha_a;
    o.metric_set = "reap";
    o.request.size = {reap::planner::size_kind::keep, "16", 16};
    o.request.split_max_bytes = 1000;
    o.predicted_bytes = 12345;
    o.predicted_shards = 2;
    reap::plan p;
    reap::planner::record_origin(p, o, "9.9");
    const json & pv = p.provenance;
    EXPECT_EQ(pv["tool"], "reap sweep 9.9");
    EXPECT_EQ(pv["saliency"], json({{"file", "s.gguf"}, {"sha256", k_sha_a}, {"metric_set", "reap"}}));
    EXPECT_EQ(pv["request"], json({{"keep", 16}, {"split_max_bytes", 1000}, {"stamp", true}}));
    EXPECT_EQ(pv["predicted_bytes"], 12345);
    EXPECT_EQ(pv["predicted_shards"], 2);
    o.request.size = {reap::planner::size_kind::budget, "400G", 0, 0, 400000000000ull};
    reap::planner::record_origin(p, o, "9.9");
    EXPECT_EQ(pv["request"]["budget"], "400G");
    EXPECT_EQ(pv["request"]["budget_bytes"], 400000000000ull);
    EXPECT_FALSE(pv["request"].contains("keep"));
}

TEST(PlanProvenance, EveryFieldReadIsTypeChecked) {
    const json good = {{"method", "reap"}, {"method_description", "d"}, {"domains", {"en", "ja"}}, {"consensus", "minrank"},
                       {"seed", 7}, {"protect_super", false}, {"saliency", {{"sha256", k_sha_a}}},
                       {"saliency_retained", {{"mean", 0.75}}}, {"request", {{"keep", 6}, {"stamp", true}}}, {"free", "form"},
                       {"predicted_bytes", 123}, {"predicted_shards", 2}, {"down_type", "q8_0"}, {"channel_score", "reap"},
                       {"width_rerank", {{"n_defined", 3}, {"min", 0.5}, {"median", 0.9}}},
                       {"super_experts_not_kept", {{{"layer", 1}, {"expert", 4}, {"max_norm", 9.5}}}},
                       {"safety_margin", {{"min", 226}, {"median", 314}}}, {"dead_experts", {{"count", 5}, {"kept", 1}}},
                       {"super_experts", {{{"layer", 1}, {"expert", 4}, {"kept", false}}, {{"layer", 2}, {"expert", 0}, {"kept", true}}}}};
    reap::planner::plan_provenance c;
    std::string err;
    ASSERT_TRUE(reap::planner::read_plan_provenance(good, "p.json", c, err)) << err;
    EXPECT_EQ(c.method, "reap");
    EXPECT_EQ(c.domains, (std::vector<std::string>{"en", "ja"}));
    EXPECT_TRUE(c.minrank);
    EXPECT_EQ(c.seed, 7u);
    EXPECT_EQ(c.protect_super, false);
    EXPECT_EQ(c.saliency_sha256, k_sha_a);
    EXPECT_TRUE(c.receipts.has_share);
    EXPECT_EQ(c.receipts.share_mean, 0.75);
    EXPECT_EQ(c.request, (std::vector<std::pair<std::string, std::string>>{{"keep", "6"}}));
    EXPECT_EQ(c.stamp, true);
    EXPECT_EQ(c.predicted_bytes, 123u);
    EXPECT_EQ(c.predicted_shards, 2u);
    EXPECT_EQ(c.down_type, "q8_0");
    EXPECT_EQ(c.channel_score, "reap");
    ASSERT_TRUE(c.width_rerank.has_value());
    EXPECT_EQ(c.width_rerank->n_defined, 3u);
    EXPECT_EQ(c.width_rerank->min, 0.5);
    ASSERT_EQ(c.super_not_kept.size(), 1u);
    EXPECT_EQ(c.super_not_kept[0].layer, 1);
    EXPECT_EQ(c.super_not_kept[0].expert, 4);
    EXPECT_EQ(c.super_not_kept[0].value, 9.5);
    EXPECT_TRUE(c.receipts.has_margin);
    EXPECT_EQ(c.receipts.margin, 226);
    EXPECT_EQ(c.receipts.margin_median, 314);
    EXPECT_TRUE(c.receipts.has_dead);
    EXPECT_EQ(c.receipts.dead, 5);
    EXPECT_EQ(c.receipts.dead_kept, 1);
    EXPECT_TRUE(c.receipts.has_super);
    EXPECT_EQ(c.receipts.super, 2);
    EXPECT_EQ(c.receipts.super_kept, 1);
    // each field of the wrong type or range: an error naming it (the same for
    // every command, since they all read through this one reader)
    const std::vector<std::pair<std::string, json>> bad = {
        {"method", 5}, {"domains", {"en", 1}}, {"consensus", "vote"}, {"seed", -1}, {"protect_super", "no"},
        {"saliency", {{"sha256", "x"}}}, {"saliency_retained", {{"mean", 1.5}}}, {"saliency_retained", {{"mean", "x"}}},
        {"request", "keep 6"}, {"request", {{"stamp", "yes"}}}, {"predicted_bytes", -5}, {"predicted_shards", 1e10},
        {"down_type", 8}, {"channel_score", false}, {"width_rerank", {{"n_defined", 2}, {"min", "low"}, {"median", 0}}},
        {"super_experts_not_kept", {{{"layer", "1"}, {"expert", 4}}}}, {"safety_margin", {{"min", "226"}, {"median", 3}}},
        {"safety_margin", {{"min", 226}}}, {"dead_experts", 7}, {"dead_experts", {{"count", 2}, {"kept", 3}}},
        {"super_experts", {{{"layer", 1}, {"expert", 2}, {"kept", "no"}}}}, {"super_experts", "many"}};
    for (const auto & [key, v] : bad) {
        json j = good;
        j[key] = v;
        EXPECT_FALSE(reap::planner::read_plan_provenance(j, "p.json", c, err)) << key << " = " << v.dump();
        EXPECT_NE(err.find("plan 'p.json'"), std::string::npos) << key << ": " << err;
        EXPECT_NE(err.find("provenance." + key), std::string::npos) << key << ": " << err;
    }
    EXPECT_FALSE(reap::planner::read_plan_provenance(json::array(), "p.json", c, err));
    EXPECT_NE(err.find("provenance"), std::string::npos) << err;
    // fields a plan made before them lacks: unset, no error
    const json older = {{"method", "reap"}, {"super_experts", {{{"layer", 1}, {"expert", 2}, {"max_norm", 5.0}}}},
                        {"safety_margin", {{"min", nullptr}, {"median", nullptr}}}};
    ASSERT_TRUE(reap::planner::read_plan_provenance(older, "p.json", c, err)) << err;
    EXPECT_FALSE(c.receipts.has_super || c.receipts.has_share || c.receipts.has_dead || c.predicted_bytes || c.stamp);
    EXPECT_TRUE(c.receipts.has_margin && c.receipts.margin_null);
    ASSERT_TRUE(reap::planner::read_plan_provenance(json(), "p.json", c, err)) << err;
}

} // namespace

// A number too large for a double is nlohmann's out_of_range (406), not a
// parse_error: it used to escape read_json_file as an exception (the fuzzer
// found it in a corpus line; `reap report --eval` aborted on it). Each JSON file
// of src/formats/ is refused naming the file and the line the number is on.
TEST(JsonFiles, ANumberTooLargeForADoubleNamesTheFileAndLine) {
    const std::string dir  = gguf_test::scratch_dir("json-number-overflow");
    const std::string path = dir + "/overflow.json";
    const std::string text = "{\n  \"format\": \"reap-eval\",\n  \"kld_mean\": 1e99999\n}\n";
    gguf_test::write_all(path, std::vector<uint8_t>(text.begin(), text.end()));
    const auto said = [&](const std::string & err) {
        EXPECT_NE(err.find("'" + path + "'"), std::string::npos) << err;
        EXPECT_NE(err.find("line 3"), std::string::npos) << err;
        EXPECT_NE(err.find("number overflow"), std::string::npos) << err;
    };
    std::string err;
    reap::eval_document e;
    EXPECT_FALSE(reap::read_eval_document(path, e, err));
    said(err);
    err.clear();
    reap::sweep_record s;
    EXPECT_FALSE(reap::read_sweep(path, s, err));
    said(err);
    err.clear();
    reap::behaviour_document b;
    EXPECT_FALSE(reap::read_behaviour_document(path, b, err));
    said(err);
}

// parse_json_text, the one entry point: the position of a number too large for
// a double is found (nlohmann's message has none), that of a parse error is the
// line and column nlohmann gives, and a good text parses.
TEST(JsonFiles, ParseJsonTextSaysWhere) {
    json j;
    std::string err;
    EXPECT_FALSE(reap::util::parse_json_text("{\"a\": 1,\n \"b\": [1, -2e400]}", "x.json", j, err));
    EXPECT_EQ(err, "x.json: not valid JSON at line 2, column 16: number overflow parsing '-2e400'");
    EXPECT_TRUE(j.is_null());
    EXPECT_FALSE(reap::util::parse_json_text("{\"a\": 1,\n\n \"b\" 2}", "x.json", j, err));
    EXPECT_NE(err.find("x.json: not valid JSON at line 3, column 6: syntax error while parsing object separator"), std::string::npos)
        << err;
    try {
        const json parsed = json::parse("{\"a\": 1,\n\n \"b\" 2}");
        ADD_FAILURE() << "nlohmann parsed it: " << parsed.dump();
    } catch (const json::parse_error & e) {
        EXPECT_NE(std::string(e.what()).find("line 3, column 6"), std::string::npos) << e.what();
    }
    ASSERT_TRUE(reap::util::parse_json_text("{\"a\": [1, 2.5]}\n", "x.json", j, err)) << err;
    EXPECT_EQ(j["a"][1].get<double>(), 2.5);
}

// The KLD base receipt (formats/kld_receipt.h): what reap eval writes reads
// back field for field; each field made wrong, and a number too large for a
// double, is refused naming the field or the line (issue 40 item 1's rule for
// every JSON reap reads, applied to the new file).
TEST(KldReceiptFormat, RoundTripsAndRefusesEachMalformedField) {
    reap::kld_base_receipt r;
    r.bytes = 123456;
    r.sha256 = k_sha_a;
    r.base_path = "base.gguf";
    r.base_sha256 = k_sha_b;
    r.base_router_sha256 = k_sha_c;
    r.base_files_sha256 = k_sha_a;
    r.base_bytes = 99;
    r.base_mask = "mask.json";
    r.base_mask_sha256 = k_sha_b;
    r.input_path = "heldout.txt";
    r.input_sha256 = k_sha_c;
    const json good = json::parse(kld_receipt_to_json(r).dump());
    reap::kld_base_receipt back;
    std::string err;
    ASSERT_TRUE(reap::kld_receipt_from_json(good, "r.json", back, err)) << err;
    EXPECT_EQ(back.bytes, r.bytes);
    EXPECT_EQ(back.sha256, r.sha256);
    EXPECT_EQ(back.base_files_sha256, r.base_files_sha256);
    EXPECT_EQ(back.base_bytes, r.base_bytes);
    EXPECT_EQ(back.base_mask_sha256, r.base_mask_sha256);
    EXPECT_EQ(back.input_sha256, r.input_sha256);
    EXPECT_EQ(reap::kld_receipt_path("d/base.kld"), "d/base.kld.reap-receipt.json");
    struct bad_case { std::string pointer; json value; std::string words; };
    const std::vector<bad_case> cases = {
        {"/format", "reap-eval", "is not a KLD base receipt"},
        {"/version", 2, "version"},
        {"/kld_base/sha256", "abc", "kld_base.sha256"},
        {"/kld_base/bytes", -1, "kld_base.bytes"},
        {"/base/files_sha256", nullptr, "base.files_sha256 is missing"},
        {"/base/header_sha256", std::string(64, 'G'), "base.header_sha256"},
        {"/base_mask/sha256", 5, "base_mask.sha256"},
        {"/input", "x", "input must be an object"},
    };
    for (const auto & c : cases) {
        json j = good;
        j[json::json_pointer(c.pointer)] = c.value;
        EXPECT_FALSE(reap::kld_receipt_from_json(j, "r.json", back, err)) << c.pointer;
        EXPECT_NE(err.find(c.words), std::string::npos) << c.pointer << ": " << err;
    }
    const std::string path = ::testing::TempDir() + "/overflow.reap-receipt.json";
    std::ofstream(path) << "{\n  \"format\": \"reap-kld-base-receipt\",\n  \"version\": 1e99999\n}\n";
    json j;
    EXPECT_FALSE(reap::util::read_json_file(path, "KLD base receipt", 1 << 20, j, err));
    EXPECT_NE(err.find("line 3, column 20: number overflow parsing '1e99999'"), std::string::npos) << err;
}

// Issue 49 item 5: an overall row that contradicts its domains' rows (the
// token-weighted mean of KLD, top-1 agreement and log-perplexity; the sum of
// tokens) is refused, naming the field, so that no card shows it as verified.
TEST(EvalFormat, AnOverallRowThatContradictsItsDomainsIsRefused) {
    std::string err;
    reap::eval_document d;
    auto refused = [&](const std::function<void(reap::eval_report &)> & damage, const std::string & what) {
        reap::eval_report r = full_report();
        damage(r);
        EXPECT_FALSE(reap::eval_document_from_json(json::parse(eval_text(r)), "r.json", d, err)) << what;
        EXPECT_NE(err.find(what), std::string::npos) << err;
    };
    refused([](reap::eval_report & r) { r.overall.kld_mean = 0.01, r.overall.kld_median = 0.005; }, "kld_mean of the whole does not follow");
    refused([](reap::eval_report & r) { r.overall.argmax_agree = 0.9999; }, "argmax_agree of the whole does not follow");
    refused([](reap::eval_report & r) { r.overall.n_tokens = 100000; }, "but the domains hold 1000");
    refused([](reap::eval_report & r) {
        r.overall.ppl_pruned = 20, r.overall.ppl_ratio = 20 / r.overall.ppl_base;
    }, "ppl_pruned of the whole does not follow");
    ASSERT_TRUE(reap::eval_document_from_json(json::parse(eval_text(full_report())), "r.json", d, err)) << err;
}

// Issue 50 item 3: reap fit's gates.json and fit.json are typed in formats/,
// read with a size cap and their format and version checked as every reader
// checks them: each round-trips, and a hand-edited file (another version,
// another format, a verdict of no candidate, a rate past 1, a winner the
// search did not score) or one of 2 GB is refused naming the file and field.
TEST(FitFiles, RoundTripAndEditsAreRefusedNamingTheField) {
    const std::string dir = gguf_test::scratch_dir("fit-files");
    reap::fit_gate_measure base;
    base.n_exact = 7;
    base.n_cells = 9;
    base.loop_rate = 0.25;
    base.termination_rate = 0.75;
    base.task_correct = {1, 0, 1, 1};
    reap::fit_gate_verdict pass{1, base, true, ""}, fail{0, base, false, "loop rate 50.0%, above the reference's"};
    fail.m.loop_rate = 0.5;
    reap::fit_record r;
    r.tool = "reap fit test";
    r.budget_text = "25MB";
    r.budget = 25000000;
    r.sources = {"a.gguf", "b.gguf"};
    r.reference = "a.gguf";
    r.heldout = "h.txt";
    r.saliency_file = "s.gguf";
    r.saliency_sha256 = k_sha_a;
    r.candidates = {{"a.gguf", 12, 768, 20000000, reap::planner::fit_score{0.125, {0.1, 0.15}, 0.75}},
                    {"b.gguf", 10, 512, 18000000, reap::planner::fit_score{0.25, {0.2, 0.3}, 0.625}, true},
                    {"b.gguf", 9, 256, 15000000, std::nullopt}};
    r.excluded = {{"a.gguf", 128, "every expert kept: 1 bytes, over the budget"}};
    r.passes_scored = 2;
    r.full_grid = 30;
    r.stop_reason = "the bracket closed";
    r.noise = 0.01;
    r.winner = 1;
    r.runner_up = 0;
    r.gates = reap::fit_record_gates{"needle slack 0", base, {fail, pass}, std::size_t(0)};
    r.build = {"plan.json", "build/x.gguf", "eval.json", "card/README.md", 17999999, 0.26, 0.62};
    const std::string text = reap::fit_record_text(r), path = dir + "/fit.json";
    std::ofstream(path) << text;
    reap::fit_record back;
    std::string err;
    ASSERT_TRUE(reap::read_fit_record(path, back, err)) << err;
    EXPECT_EQ(reap::fit_record_text(back), text);
    EXPECT_EQ(back.winner, 1u);
    ASSERT_TRUE(back.gates.has_value());
    EXPECT_EQ(back.gates->verdicts[0].why, fail.why);
    EXPECT_EQ(back.gates->reference.task_correct, base.task_correct);
    ASSERT_TRUE(back.candidates[0].score.has_value());
    EXPECT_EQ(back.candidates[0].score->kld_half[1], 0.15);
    EXPECT_FALSE(back.candidates[0].written);
    EXPECT_TRUE(back.candidates[1].written);

    const std::string gates_path = dir + "/gates.json", gates_text = reap::fit_gates_text({base, {fail, pass}});
    std::ofstream(gates_path) << gates_text;
    reap::fit_gates_doc g;
    ASSERT_TRUE(reap::read_fit_gates(gates_path, 3, g, err)) << err;
    EXPECT_EQ(reap::fit_gates_text(g), gates_text);
    EXPECT_FALSE(reap::read_fit_gates(gates_path, 1, g, err));
    EXPECT_NE(err.find("fit gates file '" + gates_path + "': verdicts[1].candidate = 1 names no candidate"), std::string::npos) << err;

    struct bad_case { std::string file, pointer; json value; std::string words; };
    const std::vector<bad_case> cases = {
        {"fit", "/version", 2, "fit record '" + path + "': version = 2 is out of range [1, 1]"},
        {"fit", "/format", "reap-sweep", "fit record '" + path + "' is not reap fit's record (format \"reap-sweep\""},
        {"fit", "/winner", 2, "winner names a candidate the search did not score"},
        {"fit", "/winner", 3, "winner = 3 names no candidate"},
        {"fit", "/passes/space", 4, "passes.space = 4, but there are 3 candidates"},
        {"fit", "/gates/verdicts/0/loop_rate", 1.5, "gates.verdicts[0].loop_rate"},
        {"fit", "/gates/verdicts/1/passed", false, "gates.verdicts[1].passed is false, but it has no why"},
        {"fit", "/gates/reference/task_accuracy", 0.5, "gates.reference.task_accuracy does not follow from task_correct"},
        {"fit", "/candidates/0/kld_halves", json::array({1}), "candidates[0].kld_halves must be two numbers"},
        {"fit", "/saliency/sha256", "abc", "saliency.sha256"},
        {"fit", "/candidates/1/scored_from", "guess", "candidates[1].scored_from = 'guess' is neither 'mask' nor 'file'"},
        {"gates", "/version", 2, "fit gates file '" + gates_path + "': version = 2 is out of range [1, 1]"},
        {"gates", "/format", "reap-fit", "is not reap fit's gates file (format \"reap-fit\""},
        {"gates", "/base/needle_exact", 10, "base.needle_exact = 10 is more than needle_cells 9"},
        {"gates", "/verdicts/0/task_correct/1", 2, "verdicts[0].task_correct [1] = 2 is not 0 or 1"},
    };
    for (const auto & c : cases) {
        json j = json::parse(c.file == "fit" ? text : gates_text);
        j[json::json_pointer(c.pointer)] = c.value;
        const std::string p = c.file == "fit" ? path : gates_path;
        std::ofstream(p) << j.dump(2);
        const bool ok = c.file == "fit" ? reap::read_fit_record(p, back, err) : reap::read_fit_gates(p, 3, g, err);
        EXPECT_FALSE(ok) << c.pointer;
        EXPECT_NE(err.find(c.words), std::string::npos) << c.pointer << ": " << err;
    }
    // 2 GB (a sparse file): refused by its size, nothing read
    ASSERT_EQ(::truncate(path.c_str(), 2000000000), 0);
    EXPECT_FALSE(reap::read_fit_record(path, back, err));
    EXPECT_NE(err.find("fit record '" + path + "' is 2000000000 bytes, more than any fit record reap writes"), std::string::npos) << err;
}
