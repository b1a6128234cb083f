// reap calibrate, the library half: corpus -> windows -> llama.cpp decodes
// with an eval callback that reads the routing, gate weights and expert
// outputs of every MoE layer -> per-domain accumulators -> saliency archive,
// with checkpoints and resume. See calibrate.h for what is read and why; the
// run's sizes (rows, -b/-ub, windows per decode) are chosen in
// calibrate_sizes.cpp, its options and cost line written in calibrate_print.cpp.
#include "llama/calibrate.h"
#include "llama/calibration.h"
#include "llama/calibrate_width.h"

#include "gguf/gguf.h"
#include "llama/corpus.h"
#include "llama/moe_nodes.h"
#include "llama/mtp.h"
#include "llama/pass_size.h"
#include "llama/runtime.h"
#include "moe/census.h"
#include "moe/identity.h"
#include "moe/layout_gguf.h"
#include "moe/width.h"
#include "plan/planners.h"
#include "plan/stability.h"
#include "saliency/checkpoint.h"
#include "saliency/merge.h"
#include "util/number_format.h"
#include "util/file.h"
#include "util/json.h"
#include "util/json_fields.h"
#include "util/memory.h"
#include "util/path.h"
#include "util/sha256.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "llama-ext.h"   // llama.cpp's staging API: unmasked nextn embeddings (row_mode::nextn_unmasked)
#include "llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

namespace reap {

namespace {

constexpr const char * k_key_before_ffn  = "reap.saliency.weights_before_ffn";
constexpr const char * k_key_nodes       = "reap.saliency.calibrate.nodes";
constexpr const char * k_key_corpus      = "reap.saliency.corpus";

}  // namespace

namespace calibrate_detail {

using util::stem_of;

bool calibration::check_options() {
    if (opt.rt.n_ctx != 0 && opt.rt.n_ctx < 2) {   // the window itself is settled on the header (load_model)
        err = "-c " + std::to_string(opt.rt.n_ctx) + " is too small";
        return false;
    }
    if (opt.rt.n_batch < 0 || opt.rt.n_ubatch < 0) {
        err = "-b and -ub must be positive (0: automatic)";
        return false;
    }
    if (opt.n_seq < 0 || opt.n_seq > (int) llama_max_parallel_sequences()) {
        err = "-np " + std::to_string(opt.n_seq) + ": windows per decode must be 0 (automatic) to " +
              std::to_string(llama_max_parallel_sequences());
        return false;
    }
    batch_memory = opt.rt.batch_memory ? opt.rt.batch_memory : k_default_batch_memory;
    if (opt.shard_count == 0 || opt.shard_index >= opt.shard_count) {
        err = "--shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
              ": need 0 <= i < n";
        return false;
    }
    if (opt.max_tokens < 0 || opt.max_tokens_per_domain < 0 || opt.checkpoint_every < 0) {
        err = "--max-tokens, --max-tokens-per-domain and --checkpoint-every must not be negative";
        return false;
    }
    const bool writes = opt.collect && !opt.dry_run;
    if (writes && opt.out_path.empty()) {
        err = "no output path (-o)";
        return false;
    }
    const bool has_target = opt.target_keep > 0 || opt.target_ratio >= 0;
    if (opt.until_stable != 0 && (!(opt.until_stable > 0 && opt.until_stable <= 1) || !opt.collect)) {
        err = "--until-stable J wants 0 < J <= 1 (a Jaccard overlap), and an archive to write";
        return false;
    }
    if ((opt.until_stable > 0 && !has_target) || (opt.target_keep > 0 && opt.target_ratio >= 0) ||
        opt.target_keep < 0 || opt.target_ratio >= 1 || (has_target && !opt.collect)) {
        err = "--until-stable J needs one target: --target-keep N or --target-ratio R (0 <= R < 1)";
        return false;
    }
    ckpt_path = opt.checkpoint_path.empty() ? opt.out_path + ".checkpoint" : opt.checkpoint_path;
    struct stat st;
    if (writes) {
        // the output rule (util/file.h): neither output is an input, nor the other output
        const std::vector<std::pair<std::string, std::string>> inputs = {{"model", opt.model_path},
                                                                          {"corpus", opt.corpus_path}};
        if (!util::check_output(opt.out_path, inputs, opt.force, err)) return false;
        std::vector<std::pair<std::string, std::string>> ck_inputs = inputs;
        ck_inputs.emplace_back("output", opt.out_path);
        if (!util::check_not_input(ckpt_path, ck_inputs, err)) {
            err += " (give another --checkpoint)";
            return false;
        }
    }
    if (writes && !opt.resume && stat(ckpt_path.c_str(), &st) == 0) {
        err = "a checkpoint '" + ckpt_path + "' exists: continue it with --resume, or remove it";
        return false;
    }
    return true;
}

// The model in llama.cpp: its header and vocabulary only (no_alloc), or with
// its weights. Everything up to the decodes (tokenizing, the probe, the
// sizes, a refusal, --dry-run) needs the header only, and a load with weights
// maps the file with MAP_POPULATE, which reads all of it: a model larger than
// memory is read once for nothing when a size is then refused.
bool calibration::load_llama_model(bool weights) {
    llama_model_params mp = common_model_params_to_llama(const_cast<common_params &>(opt.rt.llama));
    mp.load_mtp = true;   // a model's MTP blocks are calibrated too (in an MTP context, below)
    if (!weights) {
        mp.no_alloc  = true;
        mp.load_mode = LLAMA_LOAD_MODE_NONE;
    }
    model.reset(llama_model_load_from_file(opt.model_path.c_str(), mp));
    if (!model) {
        err = "llama.cpp failed to load '" + opt.model_path + "'" + (weights ? "" : " (its header)") +
              (opt.verbose ? "" : " (run with --verbose for its log)");
        return false;
    }
    return true;
}

// The model as a GGUF (fingerprint: arch, experts, MoE layers, router hash;
// sizes for the cost model), then its header in llama.cpp.
bool calibration::load_model() {
    if (!gguf::open_model(opt.model_path, gm, err)) return false;
    if (opt.collect) {
        for (const gguf::file_header & sh : gm.shards) {
            if (!util::check_not_input(opt.out_path, {{"model shard", sh.path}}, err) ||
                !util::check_not_input(ckpt_path, {{"model shard", sh.path}}, err)) {
                return false;
            }
        }
    }
    {
        pass_runtime rt = opt.rt;
        if (!settle_window(rt, moe::trained_context(gm), opt.model_path, err)) return false;
        n_ctx = rt.n_ctx;
    }
    if (!saliency::model_fingerprint(gm, fp, err)) return false;
    if (fp.n_expert_used == 0 || fp.n_expert_used > fp.n_expert) {
        err = "model '" + opt.model_path + "' has no usable expert_used_count";
        return false;
    }
    moe::census cs;
    if (!moe::take_census(gm, {}, cs, err)) return false;
    report.expert_pool_bytes = cs.expert_pool_bytes;
    model_bytes              = cs.file_bytes;

    runtime_init(opt.verbose);
    if (!load_llama_model(false)) return false;
    n_vocab = std::max<int32_t>(1, llama_vocab_n_tokens(llama_model_get_vocab(model.get())));
    // MTP blocks with routed experts (the layout's rule), when llama.cpp loaded them: an MTP
    // context runs them; there is nothing else to measure
    moe::layout lay;
    if (!moe::layout_of(gm, lay, err, moe::describe_options())) return false;
    if (mtp_heads(model.get()) > 0) {
        for (int l : fp.moe_layers) {
            if (lay.is_mtp(l)) report.mtp_layers.push_back(l);
        }
    }
    has_mtp = !report.mtp_layers.empty();
    return (opt.target_keep <= 0 && opt.target_ratio < 0) || stability_target(lay);
}

// --target-keep / --target-ratio (with --until-stable, or alone: the stability
// lines printed and recorded, the run not stopped): the target's N (plan --keep
// / --ratio rules) and the tracker.
bool calibration::stability_target(const moe::layout & lay) {
    const plan_model_facts facts = facts_of(lay, gm);
    int64_t n_keep = opt.target_keep;
    std::string note, why;
    if (opt.target_ratio >= 0 && !planner::keep_from_ratio(opt.target_ratio, facts, n_keep, note, err)) return false;
    if (!planner::keep_allowed(facts, n_keep, why)) {
        err = "--target-keep " + std::to_string(n_keep) + ": " + why;
        return false;
    }
    n_group = facts.n_group;
    stab = std::make_unique<planner::stability_tracker>(opt.until_stable, n_keep, n_group);
    return true;
}

// A stability target's windows in a fixed pseudo-random order within each
// domain. A corpus is written document after document, and a prefix of its
// windows in that order is a few documents, not a sample of the domain: on
// the demo corpus the plan of half the tokens overlapped the whole's by 0.86 to
// 0.94 all the way to the end. Shuffled, every prefix is a sample of all of
// it, so the plan settles once the tokens are enough, not once the corpus
// ends. The order is the same on every run of the same windows (its own
// generator and Fisher-Yates: std::shuffle differs between standard
// libraries), so a resumed run takes the same windows; the archive of the
// whole corpus holds the same tokens as the corpus order's, summed in another
// order.
void calibration::shuffle_within_domains() {
    std::mt19937_64 rng(k_stability_order_seed);
    for (size_t first = 0; first < windows.size();) {
        size_t last = first;
        while (last < windows.size() && windows[last].domain == windows[first].domain) ++last;
        for (size_t i = last - first; i > 1; --i) std::swap(windows[first + i - 1], windows[first + (size_t) (rng() % i)]);
        first = last;
    }
    report.shuffled = true;
}

// The decode groups reordered so that the domains take turns in proportion to
// their size (a group's place: its (index + 1/2) / the domain's groups); within
// a domain the order is kept. A domain's groups go to the split halves in turn.
void calibration::interleave_domains() {
    std::map<int, size_t> per_domain, seen;
    for (const decode_group & g : groups) ++per_domain[windows[g.first].domain];
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < groups.size(); ++i) {
        const int d = windows[groups[i].first].domain;
        groups[i].half = (int) (seen[d] % 2);   // each domain's groups alternate between the split halves
        order.emplace_back(((double) seen[d]++ + 0.5) / (double) per_domain[d], i);
    }
    std::stable_sort(order.begin(), order.end(), [](const auto & a, const auto & b) { return a.first < b.first; });
    std::vector<window>       w2;
    std::vector<decode_group> g2;
    for (const auto & [key, i] : order) {
        decode_group g = groups[i];
        const size_t first = w2.size();
        w2.insert(w2.end(), windows.begin() + (ptrdiff_t) g.first, windows.begin() + (ptrdiff_t) (g.first + g.count));
        g.first = first;
        g2.push_back(g);
    }
    windows = std::move(w2);
    groups  = std::move(g2);
    report.interleaved = true;
    stable_every = opt.checkpoint_every > 0 ? (size_t) opt.checkpoint_every : std::max<size_t>(1, (windows.size() + 19) / 20);
}

// After the group [first, next): at a stability checkpoint (every stable_every
// windows from the start), the plans of the archive so far against the earlier
// ones; held: the keep-list has held for two checkpoints.
bool calibration::check_stability(size_t first, size_t next, bool & held) {
    held = false;
    if (!at_stability_checkpoint(first, next)) return true;
    int64_t tokens = 0;
    for (const auto & d : out.domains) tokens += d.n_tokens;
    planner::stability_point p;
    if (!stab->observe(out, halves, tokens, p, err)) return false;
    report.stability = stab->curve();
    fprintf(stderr, "%sreap calibrate: %s\n", opt.progress ? "\n" : "", planner::describe(p).c_str());
    out.provenance.set_string(planner::k_key_stability_state, stab->state_json());
    held = opt.until_stable > 0 && stab->held();
    return true;
}

// The corpus, its windows with the caps applied in corpus order, then ordered
// domain by domain (see calibrate.h: Packing).
bool calibration::read_windows() {
    corpus_options copt;
    copt.shard_index = opt.shard_index;
    copt.shard_count = opt.shard_count;
    // The caps go to the reader, which tokenizes only what they let through;
    // the windows below apply them again (a no-op for JSONL, the cut for text).
    copt.max_tokens            = opt.max_tokens;
    copt.max_tokens_per_domain = opt.max_tokens_per_domain;
    copt.plain_domain = stem_of(opt.corpus_path);
    if (copt.plain_domain.empty() || copt.plain_domain.size() > saliency::k_max_domain_bytes) copt.plain_domain = "text";
    if (!read_corpus_file(opt.corpus_path, model.get(), copt, cp, err)) return false;
    if (!cp.jsonl && opt.shard_count > 1) {
        err = "--shard needs a JSONL corpus (a plain text file is one sample)";
        return false;
    }
    for (const auto & d : cp.domains) {
        if (d.size() > saliency::k_max_domain_bytes) {
            err = "domain name '" + d + "' is longer than " + std::to_string(saliency::k_max_domain_bytes) + " bytes";
            return false;
        }
    }
    if (!util::sha256_file(opt.corpus_path, corpus_sha, err)) return false;
    report.n_samples       = cp.samples.size();
    report.n_samples_total = cp.n_lines_total;

    std::vector<int64_t> dom_used(cp.domains.size(), 0);
    int64_t used = 0;
    auto cap = [&](int dom, int64_t len) {
        if (opt.max_tokens > 0) len = std::min(len, opt.max_tokens - used);
        if (opt.max_tokens_per_domain > 0) len = std::min(len, opt.max_tokens_per_domain - dom_used[dom]);
        return std::max<int64_t>(len, 0);
    };
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const bool plain_bos = !cp.jsonl && llama_vocab_get_add_bos(vocab) && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL;
    for (size_t s = 0; s < cp.samples.size(); ++s) {
        const auto & smp = cp.samples[s];
        const int64_t n = (int64_t) smp.tokens.size();
        const int64_t n_win = cp.jsonl ? (n + n_ctx - 1) / n_ctx : n / n_ctx;
        for (int64_t c = 0; c < n_win; ++c) {
            const int64_t len = cap(smp.domain, std::min<int64_t>(n_ctx, n - c * n_ctx));
            if (len == 0) continue;
            windows.push_back({s, c * n_ctx, (int) len, smp.domain, plain_bos});
            used += len;
            dom_used[smp.domain] += len;
        }
    }
    if (!cp.jsonl && windows.empty()) {
        err = "text '" + opt.corpus_path + "' tokenizes to " +
              std::to_string(cp.samples.empty() ? 0 : cp.samples[0].tokens.size()) + " tokens: one window needs -c " +
              std::to_string(n_ctx);
        return false;
    }
    if (windows.empty()) {
        err = "corpus '" + opt.corpus_path + "' has no tokens to calibrate on" +
              (opt.shard_count > 1 ? " in shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) : "");
        return false;
    }
    std::stable_sort(windows.begin(), windows.end(), [](const window & a, const window & b) { return a.domain < b.domain; });
    if (stab) shuffle_within_domains();
    for (const auto & w : windows) report.n_tokens += w.len;
    report.n_windows = windows.size();
    return true;
}









// The main context (and the MTP context beside it) for the chosen decodes.
bool calibration::make_contexts() {
    llama_context_params cparams = context_params(report.n_batch, report.n_ubatch, report.n_seq, report.kv_unified);
    cparams.cb_eval           = opt.collect ? collector::callback : nullptr;
    cparams.cb_eval_user_data = opt.collect ? &col : nullptr;
    ctx.reset(llama_init_from_model(model.get(), cparams));
    if (!ctx) {
        err = "failed to create a llama.cpp context (-c " + std::to_string(cparams.n_ctx) + ", -b " +
              std::to_string(cparams.n_batch) + ", -ub " + std::to_string(cparams.n_ubatch) + ", " +
              std::to_string(report.n_seq) + " sequences)";
        return false;
    }
    if (report.rows == row_mode::nextn_unmasked && !has_mtp) llama_set_embeddings_nextn(ctx.get(), true, /*masked=*/false);
    if (has_mtp) {
        if (!mtp.init(model.get(), ctx.get(), mtp_params(cparams), err, report.n_seq)) return false;
    }
    batch = llama_batch_init(report.n_batch, 0, 1);
    row_pos.resize((size_t) report.n_batch);
    row_seq.resize((size_t) report.n_batch);
    return true;
}

bool calibration::resume() {
    struct stat st;
    saliency::archive ck;
    if (stat(ckpt_path.c_str(), &st) != 0) {
        err = "--resume: no checkpoint '" + ckpt_path + "'";
        return false;
    }
    if (!saliency::read_archive(ckpt_path, ck, err)) return false;
    if (!saliency::fingerprints_match(ck.model, fp, err)) return false;
    std::string e2, ck_sha, ck_opts;
    uint64_t ck_next = 0, ck_n = 0;
    if (!ck.provenance.get_string(saliency::k_key_corpus_sha256, ck_sha, e2) ||
        !ck.provenance.get_string(saliency::k_key_options, ck_opts, e2) ||
        !ck.provenance.get_u64(saliency::k_key_checkpoint_next_window, ck_next, e2) ||
        !ck.provenance.get_u64(saliency::k_key_checkpoint_n_windows, ck_n, e2)) {
        err = "checkpoint '" + ckpt_path + "' is not a reap calibrate checkpoint: " + e2;
        return false;
    }
    if (ck_sha != corpus_sha) {
        err = "checkpoint '" + ckpt_path + "' was made on another corpus (sha256 " + ck_sha + ", now " + corpus_sha + ")";
        return false;
    }
    if (ck_opts != options_json) {
        err = "checkpoint '" + ckpt_path + "' was made with other options: " + ck_opts + " (now " + options_json + ")";
        return false;
    }
    if (!ck.has_sq_norms) {
        err = "checkpoint '" + ckpt_path + "' was made by a reap that did not record squared output norms: remove it to start again";
        return false;
    }
    if (ck.has_shared_channels != out.has_shared_channels) {
        err = "checkpoint '" + ckpt_path + "' was made " + (ck.has_shared_channels ? "with" : "without") +
              " the shared expert's channel statistics, which this run " + (out.has_shared_channels ? "collects" : "does not collect");
        return false;
    }
    const bool at_group = std::any_of(groups.begin(), groups.end(), [&](const decode_group & g) { return g.first == ck_next; });
    if (ck_n != windows.size() || ck_next > ck_n || (ck_next < ck_n && !at_group) || ck.domains.size() != out.domains.size()) {
        err = "checkpoint '" + ckpt_path + "' does not match this run's windows/domains";
        return false;
    }
    for (size_t d = 0; d < ck.domains.size(); ++d) {
        if (ck.domains[d].name != out.domains[d].name) {
            err = "checkpoint '" + ckpt_path + "' has domain '" + ck.domains[d].name + "' where this run has '" +
                  out.domains[d].name + "'";
            return false;
        }
        out.domains[d] = ck.domains[d];
    }
    next_window = (size_t) ck_next;
    report.resumed = true;
    std::string state;
    if (stab && ck.provenance.get_string(planner::k_key_stability_state, state, e2)) {
        if (!stab->restore(state, err)) {
            err = "checkpoint '" + ckpt_path + "': " + err;
            return false;
        }
        report.stability = stab->curve();
        out.provenance.set_string(planner::k_key_stability_state, state);
    }
    if (stab && !saliency::read_split_halves(ckpt_path, ck_next, out, halves, err)) return false;
    return true;
}

void calibration::print_cost() const {
    fputs(calibrate_cost_text(report, windows.size(), groups.size(), model_bytes, util::available_memory()).c_str(), stderr);
}

// Decodes the first n rows of `batch` (and the MTP context's the same).
bool calibration::decode_rows(int n, std::string & e) {
    batch.n_tokens = n;
    const int rc = llama_decode(ctx.get(), batch);
    if (!col.err.empty()) {
        e = "calibration callback: " + col.err;
        return false;
    }
    if (rc != 0) {
        e = "llama_decode failed (" + std::to_string(rc) + ")";
        return false;
    }
    if (has_mtp) {
        const bool ok = mtp.feed_rows(batch.token, row_pos.data(), row_seq.data(), n, e);
        if (!col.err.empty()) {
            e = "calibration callback (MTP context): " + col.err;
            return false;
        }
        if (!ok) return false;
    }
    return true;
}

// One group: its windows side by side (or one long window, -b tokens at a
// time), one domain, the memory cleared first.
bool calibration::decode_group_rows(const decode_group & g) {
    llama_memory_clear(llama_get_memory(ctx.get()), true);
    if (has_mtp) mtp.reset();
    const llama_token bos = llama_vocab_bos(llama_model_get_vocab(model.get()));
    const bool every_row  = report.rows == row_mode::every_row;
    int n = 0;
    auto add = [&](const window & w, int seq, int p) {
        batch.token[n]     = (p == 0 && w.bos_first) ? bos : cp.samples[w.sample].tokens[(size_t) (w.offset + p)];
        batch.pos[n]       = p;
        batch.n_seq_id[n]  = 1;
        batch.seq_id[n][0] = seq;
        batch.logits[n]    = every_row;   // else one output row (the last), see calibrate.h
        row_pos[(size_t) n] = p;
        row_seq[(size_t) n] = seq;
        ++n;
    };
    auto flush = [&]() {
        batch.logits[n - 1] = 1;
        std::string e;
        if (!decode_rows(n, e)) {
            err = "window " + std::to_string(g.first) + " (" + cp.domains[windows[g.first].domain] + "): " + e;
            return false;
        }
        ++report.n_decodes;
        n = 0;
        return true;
    };
    if (g.tokens > report.n_batch) {
        const window & w = windows[g.first];
        for (int b = 0; b < w.len; b += report.n_batch) {
            for (int p = b; p < std::min(w.len, b + report.n_batch); ++p) add(w, 0, p);
            if (!flush()) return false;
        }
        return true;
    }
    for (size_t k = 0; k < g.count; ++k) {
        const window & w = windows[g.first + k];
        for (int p = 0; p < w.len; ++p) add(w, (int) k, p);
    }
    return flush();
}

// The split halves first (their own file, named by the window), then the
// checkpoint, then the halves of the checkpoint it replaced: a crash at any
// point leaves a checkpoint and its halves.
bool calibration::write_checkpoint(size_t next, std::string & e) {
    if (stab && !saliency::write_split_halves(halves, (uint64_t) next, ckpt_path, e)) return false;
    if (!saliency::write_checkpoint(out, (uint64_t) next, (uint64_t) windows.size(), ckpt_path, e)) return false;
    if (stab) saliency::remove_split_halves(ckpt_path, (uint64_t) next);
    report.checkpoint_written = ckpt_path;
    return true;
}

bool calibration::decode_all() {
    int64_t tokens_before = 0;
    for (size_t w = 0; w < next_window; ++w) tokens_before += windows[w].len;
    size_t ubatches_before = 0;   // of a resumed run (report.n_ubatches: the whole run's, choose_decodes)
    for (const auto & g : groups) {
        if (g.first < next_window) ubatches_before += group_ubatches(g, report.n_batch, report.n_ubatch);
    }
    progress_line prog;
    prog.enabled = opt.progress;
    prog.start("calibrate", report.n_tokens, tokens_before);
    prog.set_steps("ubatch", (int64_t) report.n_ubatches, (int64_t) ubatches_before);
    const auto t0 = std::chrono::steady_clock::now();
    size_t since_ckpt = 0;
    for (const decode_group & g : groups) {
        if (g.first < next_window) continue;
        const size_t d = (size_t) windows[g.first].domain;
        saliency::archive & half = g.half ? halves.b : halves.a;
        col.dom  = opt.collect ? &out.domains[d] : &scratch;
        col.half = opt.collect && stab ? &half.domains[d] : nullptr;
        if (!decode_group_rows(g)) return false;
        windows_end = g.first + g.count;
        if (opt.collect) out.domains[d].n_tokens += g.tokens;
        if (col.half) col.half->n_tokens += g.tokens;
        prog.add(g.tokens, (int64_t) group_ubatches(g, report.n_batch, report.n_ubatch));
        const size_t done_before = report.n_windows_done;
        report.n_windows_done += g.count;
        since_ckpt += g.count;
        const size_t next = g.first + g.count;
        if (opt.pause_after_windows > 0 && opt.stop && done_before < (size_t) opt.pause_after_windows &&
            report.n_windows_done >= (size_t) opt.pause_after_windows) {
            fprintf(stderr, "reap calibrate: paused after %zu windows\n", report.n_windows_done);
            for (int i = 0; i < 6000 && !opt.stop->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        bool held = false;
        if (!check_stability(g.first, next, held)) return false;
        if (held && next < windows.size()) {
            report.stopped_stable = true;
            break;
        }
        const bool stop = opt.stop && opt.stop->load();
        const bool periodic = stab ? at_stability_checkpoint(g.first, next)
                                   : opt.checkpoint_every > 0 && since_ckpt >= (size_t) opt.checkpoint_every;
        if (opt.collect && next < windows.size() && (stop || periodic)) {
            if (!write_checkpoint(next, err)) return false;
            since_ckpt = 0;
        }
        if (stop && next < windows.size()) {
            report.interrupted = true;
            break;
        }
    }
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report.tokens_per_second = report.seconds > 0 ? prog.done_here / report.seconds : 0;
    if (prog.enabled && prog.done < prog.total) fprintf(stderr, "\n");
    if (opt.collect) report.n_ubatches = col.n_ubatches;   // as llama.cpp split them (this invocation)
    return true;
}

// Self-check, then write.
bool calibration::finish() {
    for (int l : col.shared_norms ? fp.moe_layers : std::vector<int>()) {
        const layer_state & L = col.layers[(size_t) l];
        if (L.shared_rows != L.routed_rows) {
            err = "llama.cpp's graph gave the shared expert's down projection (blk." + std::to_string(l) +
                  ".ffn_down_shexp.weight) " + std::to_string(L.shared_rows) + " rows of layer " + std::to_string(l) + "'s " +
                  std::to_string(L.routed_rows) + " routed tokens: its channel statistics would be incomplete";
            return false;
        }
    }
    if (!saliency::check_count_invariant(out, err)) {
        err = "internal check failed (please report): " + err;
        return false;
    }
    // the samples decoded, so that reap merge refuses two archives sharing one
    std::vector<uint64_t> hashes;
    for (size_t w = 0; w < std::max(windows_end, next_window); ++w) hashes.push_back(cp.samples[windows[w].sample].hash);
    saliency::set_sample_hashes(out, std::move(hashes));
    if (stab) {   // the curve stays with the archive; what resuming needed goes
        out.provenance.remove(planner::k_key_stability_state);
        out.provenance.set_string(planner::k_key_stability, stab->curve_json());
    }
    if (!saliency::publish_calibration(out, opt.out_path, opt.force, ckpt_path, err)) return false;
    if (stab) saliency::remove_split_halves(ckpt_path, UINT64_MAX);
    report.checkpoint_written.clear();
    return true;
}

}  // namespace calibrate_detail

bool run_calibrate(const calibrate_options & opt, saliency::archive & out, calibrate_report & report, std::string & err) {
    report = calibrate_report();
    calibrate_detail::calibration c{opt, out, report, err};
    if (!c.check_options() || !c.load_model() || !c.read_windows() || !c.choose_decodes()) return false;
    if (opt.dry_run) {   // before anything reads the model's weights (the width norms do)
        c.print_cost();
        return true;
    }
    if (!c.load_llama_model(true)) return false;

    if (opt.width_saliency && opt.collect) {
        if (!down_column_norms(c.gm, c.fp.moe_layers, c.fp.n_layer, c.fp.n_expert, c.column_norms, c.n_ff, err)) return false;
        c.col.n_ff         = c.n_ff;
        c.col.column_norms = &c.column_norms;
        // a shared expert cut with the routed ones (llama4) needs its own channel saliency
        moe::layout lay;
        moe::expert_width w;
        if (!moe::layout_of(c.gm, lay, err, moe::describe_options()) || !moe::expert_width_of(c.gm, lay, w, err)) return false;
        if (w.shared_cut) {
            if (!shared_down_column_norms(c.gm, c.fp.moe_layers, c.fp.n_layer, c.n_ff, c.shared_norms, err)) return false;
            c.col.shared_norms = &c.shared_norms;
        }
    }

    // The archive: every domain of the corpus, in first-seen order.
    out = saliency::make_archive(c.fp, saliency::metric_set::reap);
    out.n_ff = (uint32_t) c.n_ff;
    out.has_shared_channels = c.col.shared_norms != nullptr;
    out.has_sq_norms = true;   // MSAN's Σ‖f‖²
    for (const auto & d : c.cp.domains) out.add_domain(d);
    if (c.stab) c.halves = saliency::make_split_halves(out);
    c.options_json = calibrate_options_json(opt, c.n_ctx, !c.cp.jsonl, report);
    out.provenance.set_string(saliency::k_key_tool, std::string("reap calibrate"));
    out.provenance.set_string(saliency::k_key_corpus_sha256, c.corpus_sha);
    out.provenance.set_string(k_key_corpus, util::base_name(opt.corpus_path));
    out.provenance.set_string(saliency::k_key_options, c.options_json);
    if (opt.collect) {
        out.provenance.set_string(k_key_nodes, "ffn_moe_topk, " + report.weights_node + ", " + report.down_node +
                                                   (c.n_ff > 0 ? ", ffn_moe_down (its input)" : "") +
                                                   (out.has_shared_channels ? ", the product with ffn_down_shexp (its input)" : ""));
        out.provenance.set_bool(k_key_before_ffn, report.weights_before_ffn);
    }
    if (!c.make_contexts()) return false;
    if (opt.collect && opt.resume && !c.resume()) return false;
    c.print_cost();
    if (!c.decode_all()) return false;
    for (const auto & d : out.domains) report.domain_tokens.emplace_back(d.name, d.n_tokens);
    if (!opt.collect || report.interrupted) return true;
    return c.finish();
}

}  // namespace reap
