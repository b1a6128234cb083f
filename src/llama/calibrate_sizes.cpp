// How calibrate decodes (calibrate.h): the probe that finds which rows each
// MoE layer runs on, the row mode it allows, and the sizes of the decodes
// (-b/-ub and windows per decode, measured against --memory when not given),
// kept from the checkpoint when a run resumes.
#include "llama/calibration.h"

#include "saliency/checkpoint.h"
#include "util/json_fields.h"
#include "util/memory.h"
#include "util/number_format.h"

#include "common.h"
#include "llama-ext.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

namespace reap::calibrate_detail {

std::vector<decode_group> plan_groups(const std::vector<window> & windows, int n_seq, int n_batch) {
    std::vector<decode_group> groups;
    for (size_t w = 0; w < windows.size();) {
        decode_group g;
        g.first = w;
        while (w < windows.size() && g.count < (size_t) n_seq && windows[w].domain == windows[g.first].domain &&
               (g.count == 0 || g.tokens + windows[w].len <= n_batch)) {
            g.tokens += windows[w].len;
            ++g.count;
            ++w;
        }
        groups.push_back(g);
    }
    return groups;
}

// The ubatches llama.cpp makes of a group when it splits batches in order.
size_t group_ubatches(const decode_group & g, int n_batch, int n_ubatch) {
    if (g.tokens <= n_batch) return (size_t) ((g.tokens + n_ubatch - 1) / n_ubatch);
    size_t n = 0;
    for (int64_t b = 0; b < g.tokens; b += n_batch) n += (size_t) ((std::min<int64_t>(n_batch, g.tokens - b) + n_ubatch - 1) / n_ubatch);
    return n;
}

llama_context_params calibration::context_params(int n_batch, int n_ubatch, int n_seq, bool unified) const {
    // unified: a packed decode, or one whole window, in one cache; else a window per stream
    const uint32_t cells = unified ? (uint32_t) std::max(n_ctx, n_batch) : (uint32_t) n_ctx * (uint32_t) n_seq;
    return pass_context_params(opt.rt, cells, (uint32_t) n_batch, (uint32_t) n_ubatch, (uint32_t) n_seq, unified);
}

// The graph of a two-token ubatch with one output row, as llama.cpp reserves
// it in a context of its own on the model's header (no weight is read): which
// build_moe_ffn nodes each layer's graph has, and whether every trunk MoE
// layer runs on both rows (node shapes tell). nextn: with unmasked nextn
// embeddings asked for. An MTP model's probe reserves its MTP context's graphs
// too, one per chained head (its blocks' nodes; every MTP row is an output).
bool calibration::probe(bool nextn, collector & pc, bool & all_rows) {
    pc.n_expert = fp.n_expert;
    pc.n_used   = fp.n_expert_used;
    pc.layers.assign(fp.n_layer, layer_state());
    const llama_context_params cparams = context_params(2, 2, 1, true);
    const auto observe_graph = [&](llama_context * ctx, uint32_t n_outputs, const char * what) {
        held_llama_errors held;
        ggml_cgraph * gf = llama_graph_reserve(ctx, 2, 1, n_outputs);
        if (!gf) {
            err = std::string("llama.cpp could not lay out the probe's graph (") + what + ")";
            const std::string said = held.take();
            if (!said.empty()) err += ": llama.cpp said: " + said;
            return false;
        }
        for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) pc.observe(ggml_graph_node(gf, i));
        return true;
    };
    ctx_ptr pctx(llama_init_from_model(model.get(), cparams));
    if (!pctx) {
        err = "failed to create a llama.cpp context for the probe";
        return false;
    }
    // an MTP model's main context runs with unmasked nextn embeddings, which its
    // MTP context reads (mtp_runner::init asks for them)
    if (nextn || has_mtp) llama_set_embeddings_nextn(pctx.get(), true, /*masked=*/false);
    if (!observe_graph(pctx.get(), 1, "the model")) return false;
    if (has_mtp) {
        const ctx_ptr side(llama_init_from_model(model.get(), mtp_context_params(cparams, pctx.get(), 1)));
        if (!side) {
            err = "llama.cpp could not create an MTP context for the probe";
            return false;
        }
        // chained heads are one graph each, chosen by the head offset (mtp.cpp)
        const int n_heads = mtp_heads(model.get());
        for (int head = 0; head < n_heads; ++head) {
            if (n_heads > 1) llama_set_nextn_layer_offset(side.get(), head);
            if (!observe_graph(side.get(), 2, "its MTP blocks")) return false;
        }
    }
    all_rows = true;
    for (int l : fp.moe_layers) {
        const layer_state & L = pc.layers[(size_t) l];
        if (!is_mtp_block(l) && L.saw_topk && L.probe_rows < 2) all_rows = false;
    }
    return true;
}

// Row mode, -b/-ub and windows per decode (calibrate.h), from the probe.
bool calibration::choose_decodes() {
    collector seen;
    bool all_rows = false;
    if (!probe(false, seen, all_rows)) return false;
    report.rows = all_rows ? (has_mtp ? row_mode::nextn_unmasked : row_mode::one_output) : row_mode::every_row;
    if (!all_rows && !has_mtp) {
        collector seen2;
        bool all2 = false;
        if (!probe(true, seen2, all2)) return false;
        if (all2) report.rows = row_mode::nextn_unmasked;
    }

    // which nodes each MoE layer has: the collector asks for exactly those
    std::vector<bool> is_moe(fp.n_layer, false);
    for (int l : fp.moe_layers) is_moe[(size_t) l] = true;
    col.n_expert = fp.n_expert;
    col.n_used   = fp.n_expert_used;
    col.weights_before_ffn = seen.weights_before_ffn;
    col.layers.assign(fp.n_layer, layer_state());
    for (int l = 0; l < (int) fp.n_layer; ++l) {
        const layer_state & S = seen.layers[(size_t) l];
        if (!is_moe[(size_t) l]) {
            if (S.saw_topk) {
                err = "llama.cpp routes experts in layer " + std::to_string(l) + ", which the GGUF layout says is dense";
                return false;
            }
            continue;
        }
        const char * missing = !S.saw_topk ? "ffn_moe_topk" : S.weights_node < 0 ? "ffn_moe_weights"
                             : S.down_node < 0 ? "ffn_moe_down" : nullptr;
        if (missing) {
            err = "arch '" + fp.arch + "': llama.cpp's graph has no node " + missing + "-" + std::to_string(l) +
                  " in MoE layer " + std::to_string(l) +
                  ": reap calibrate cannot read this architecture's routing (it reads build_moe_ffn's nodes)";
            return false;
        }
        col.layers[(size_t) l].weights_node = S.weights_node;
        col.layers[(size_t) l].down_node    = S.down_node;
        if (col.first_trunk_layer < 0 && !is_mtp_block(l)) col.first_trunk_layer = l;
    }
    const layer_state & L0 = col.layers[(size_t) fp.moe_layers.front()];
    report.weights_node       = k_weight_chain[L0.weights_node];
    report.down_node          = k_down_chain[L0.down_node];
    report.weights_before_ffn = col.weights_before_ffn;

    if (!choose_sizes()) return false;
    if (stab) interleave_domains();
    return true;
}

// The decodes of -b n_batch -ub n_ubatch (report's n_batch, n_ubatch, n_seq,
// kv_unified, n_ubatches, batch_capped, and the groups).
void calibration::lay_out_decodes(int n_batch, int n_ubatch) {
    n_ubatch = std::min(n_ubatch, n_batch);
    report.batch_capped = false;
    if (report.rows == row_mode::every_row && n_batch > rows_within_batch_memory()) {
        n_batch  = (int) rows_within_batch_memory();
        n_ubatch = std::min(n_ubatch, n_batch);
        report.batch_capped = true;
    }
    report.n_batch  = n_batch;
    report.n_ubatch = n_ubatch;
    // windows per decode: the user's; automatic: as many as -b holds (each a row of llama.cpp's
    // output buffer: at most 64 up to -b 4096, then one per 64 tokens, within llama.cpp's
    // limit), full windows only for recurrent/hybrid memories (a state per sequence); one
    // where an MTP context follows a recurrent/hybrid model (its rows must come back in batch order)
    const bool recurrent = llama_model_is_recurrent(model.get()) || llama_model_is_hybrid(model.get());
    const int  most_seq  = (int) llama_max_parallel_sequences();
    int n_seq = opt.n_seq > 0 ? opt.n_seq
              : recurrent     ? std::min(most_seq, std::max(1, n_batch / n_ctx))
                              : std::min({most_seq, std::max(1, n_batch / 32), std::max(64, n_batch / 64)});
    if (has_mtp && recurrent) n_seq = 1;
    groups = plan_groups(windows, n_seq, n_batch);
    // the context holds exactly the most windows a decode has
    size_t most = 1;
    for (const auto & g : groups) most = std::max(most, g.count);
    report.n_seq = (int) most;
    // Windows of one length (plain text) get a KV stream each, as llama-perplexity
    // and llama-imatrix lay them out (attention then costs Σ len², not (Σ len)²);
    // windows of several lengths share one unified cache, which llama.cpp splits in
    // batch order, so a ubatch holds -ub tokens (separate streams would be split
    // into equal lengths per sequence: more ubatches). An MTP context needs the
    // target's rows in batch order: unified.
    const bool one_length = std::all_of(windows.begin(), windows.end(),
                                        [&](const window & w) { return w.len == windows[0].len; });
    report.kv_unified = has_mtp || !one_length;
    report.n_ubatches = 0;
    for (const auto & g : groups) report.n_ubatches += group_ubatches(g, n_batch, n_ubatch);
}

// The MTP context's settings beside a main context of cparams: slices of what
// --batch-memory allows (every MTP row is an output, calibrate.h).
llama_context_params calibration::mtp_params(const llama_context_params & cparams) const {
    llama_context_params mp = cparams;
    mp.n_batch   = (uint32_t) std::min<int64_t>(report.n_batch, rows_within_batch_memory());
    mp.n_ubatch  = std::min(mp.n_batch, (uint32_t) report.n_ubatch);
    mp.n_seq_max = (uint32_t) report.n_seq;
    return mp;
}

// What the laid-out decodes need in memory, as llama.cpp reserves it.
bool calibration::measure_decodes(context_meter & meter, context_bytes & bytes, std::string & e) const {
    const llama_context_params cparams = context_params(report.n_batch, report.n_ubatch, report.n_seq, report.kv_unified);
    const llama_context_params mp = mtp_params(cparams);
    const int64_t rows = (report.rows == row_mode::every_row ? report.n_batch : report.n_seq) + (has_mtp ? (int64_t) mp.n_batch : 0);
    return meter.measure(cparams, rows, has_mtp ? &mp : nullptr, bytes, e);
}

// -b/-ub: given by hand (or by the checkpoint resumed), checked against the
// memory; else the largest ubatch that fits it (pass_size.h).
bool calibration::choose_sizes() {
    int64_t n_tokens = 0;
    for (const window & w : windows) n_tokens += w.len;
    int b = opt.rt.n_batch, ub = opt.rt.n_ubatch;
    const char * by = (b > 0 || ub > 0) ? "given" : nullptr;
    if (!by && opt.collect && opt.resume) {
        if (!checkpoint_sizes(b, ub)) return false;
        if (b > 0) by = "the checkpoint's";
    }
    const memory_budget budget = pass_memory_budget(opt.rt.memory, model_bytes, util::available_memory());
    context_meter meter;
    llama_model_params mp = common_model_params_to_llama(const_cast<common_params &>(opt.rt.llama));
    mp.load_mtp = true;
    if (budget.known && !meter.open(opt.model_path, mp, err)) return false;
    auto need = [&](int nb, int nub, context_bytes & bytes, std::string & e) {
        lay_out_decodes(nb, nub);
        return !budget.known || measure_decodes(meter, bytes, e);
    };
    context_bytes bytes;
    if (by) {
        const int nb = b > 0 ? b : std::max({ub, k_default_batch, n_ctx});
        if (!need(nb, ub > 0 ? ub : nb, bytes, err)) return false;
        if (budget.known && !fits(bytes, budget)) {
            err = "-b " + std::to_string(report.n_batch) + " -ub " + std::to_string(report.n_ubatch) + " (" + by + ") " +
                  shortfall(bytes, budget) + ": give a smaller -ub, leave -b/-ub out to have the largest that fits chosen, or set --memory";
            return false;
        }
        report.memory_needed = bytes.total();
        report.size_note = std::string("-ub ") + by + (budget.known ? ", needs " + describe(bytes) + " of " +
                           util::format_size(budget.bytes) + " (" + budget.why + ")" : "");
    } else {
        sized_choice pick;
        const auto sized = [&](int c) { return c >= k_default_batch ? std::max(c, n_ctx) : c; };
        if (!choose_largest_fitting(ubatch_candidates(n_tokens), budget,
                                    [&](int c, context_bytes & bb, std::string & e) { return need(sized(c), sized(c), bb, e); },
                                    pick, err)) {
            return false;
        }
        if (budget.known && !pick.fits) {   // refused before any decode, as a size given by hand is
            err = "-ub automatic: even the smallest size (" + std::to_string(sized(pick.size)) + " tokens) needs " + describe(pick.bytes) +
                  ", more than the " + util::format_size(budget.bytes) + " it may take (" + budget.why +
                  "): give a larger --memory, or -b/-ub by hand";
            return false;
        }
        lay_out_decodes(sized(pick.size), sized(pick.size));
        report.memory_needed = pick.bytes.total();
        report.size_note = !budget.known ? "-ub automatic: the memory of this machine is unknown, so reap's default"
                                         : "-ub automatic: the largest that fits, needs " + describe(pick.bytes) + " of " +
                                               util::format_size(budget.bytes) + " (" + budget.why + ")";
    }
    if (budget.known) report.memory_budget = budget.bytes;
    if (report.batch_capped) {
        fprintf(stderr, "reap calibrate: -b/-ub lowered to %d tokens: arch '%s' narrows to the output rows before "
                "its last MoE layer, so every row is an output, and %s tokens of a %s-token vocabulary keep %s of "
                "logits twice (--batch-memory %s)\n", report.n_batch, fp.arch.c_str(), util::group_digits(report.n_batch).c_str(),
                util::group_digits(n_vocab).c_str(), util::format_size((uint64_t) report.n_batch * n_vocab * sizeof(float)).c_str(),
                util::format_size(batch_memory).c_str());
    }
    return true;
}

// -b/-ub of the checkpoint to be resumed (0 when it has none): an automatic
// choice is not made again, since other sizes sum in another order.
bool calibration::checkpoint_sizes(int & b, int & ub) {
    struct stat st;
    if (stat(ckpt_path.c_str(), &st) != 0) return true;   // resume() says there is none
    saliency::archive ck;
    std::string opts, e2;
    nlohmann::json j;
    if (!saliency::read_archive(ckpt_path, ck, err)) return false;
    if (!ck.provenance.get_string(saliency::k_key_options, opts, e2) ||
        !util::parse_json_text(opts, "checkpoint '" + ckpt_path + "' options", j, err)) {
        if (err.empty()) err = "checkpoint '" + ckpt_path + "' is not a reap calibrate checkpoint: " + e2;
        return false;
    }
    if (j.is_object() && j.contains("n_batch") && j.contains("n_ubatch") && j["n_batch"].is_number_integer() &&
        j["n_ubatch"].is_number_integer() && j["n_batch"].get<int64_t>() > 0 && j["n_batch"].get<int64_t>() <= INT32_MAX &&
        j["n_ubatch"].get<int64_t>() > 0 && j["n_ubatch"].get<int64_t>() <= INT32_MAX) {
        b  = (int) j["n_batch"].get<int64_t>();
        ub = (int) j["n_ubatch"].get<int64_t>();
    }
    return true;
}

}  // namespace reap::calibrate_detail
