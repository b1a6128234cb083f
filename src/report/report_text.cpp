// The card's text (README.md of a pruned build), section by section, from
// the facts report.cpp gathered and checked (report_facts.h). Every text from
// an input goes through the escape of its destination (util/text_escape.h).
#include "report/report_facts.h"

#include "moe/width.h"
#include "util/number_format.h"
#include "util/path.h"
#include "util/strings.h"
#include "util/text_escape.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>

namespace reap::report::detail {

// A YAML scalar, double-quoted.
std::string yaml_str(const std::string & s) {
    std::string r = "\"";
    for (char c : util::printable_utf8(s)) {
        if (c == '"' || c == '\\') r += '\\';
        if (c == '\n') { r += "\\n"; continue; }
        r += c;
    }
    return r + "\"";
}

std::string eval_table(const eval_entry & e) {
    std::string o = "| domain | tokens | KLD mean | KLD median | KLD p99 | top-1 agreement | PPL ratio |\n|---|---:|---:|---:|---:|---:|---:|\n";
    auto row = [&](const std::string & name, const eval_metrics & m) {
        o += "| " + name + " | " + util::group_digits(m.n_tokens) + " | " + fmt("%.4f", m.kld_mean) + " | " + fmt("%.4f", m.kld_median) +
             " | " + fmt("%.4f", m.kld_p99) + " | " + pct(m.argmax_agree, 2) + " | " + fmt("%.4f", m.ppl_ratio) + " |\n";
    };
    for (const auto & [name, m] : e.r.domains) {
        if (m.n_tokens) row(util::markdown_text(name), m);   // a domain's name is data
    }
    row("**all**", e.r.overall);
    return o;
}

// A census row: label, source value, build value.
void census_row(std::string & o, const std::string & label, const std::string & a, const std::string & b) {
    o += "| " + label + " | " + util::markdown_text(a) + " | " + util::markdown_text(b) + " |\n";
}

std::string types_of(const moe::census & c) {
    std::vector<std::string> v;
    for (const auto & [name, tc] : c.types) v.push_back(name + " ×" + std::to_string(tc.count));
    return util::join(v, ", ");
}

// The Hugging Face repo id of the source, when its GGUF says where it came from.
std::string hf_repo_of(const gguf::model & m) {
    std::string err;
    for (const char * key : {"general.base_model.0.repo_url", "general.source.repo_url", "general.repo_url"}) {
        std::string url;
        if (!m.kvs.get_string_or(key, "", url, err) || url.empty()) continue;
        const std::string pre = "https://huggingface.co/";
        if (util::starts_with(url, pre.c_str())) {
            std::string id = url.substr(pre.size());
            while (!id.empty() && id.back() == '/') id.pop_back();
            // an org/name as the Hub spells one, nothing else: the id goes into
            // the front matter unquoted, and a newline there would add keys
            const bool plain = std::all_of(id.begin(), id.end(), [](char ch) {
                return std::isalnum((unsigned char) ch) || ch == '-' || ch == '_' || ch == '.' || ch == '/';
            });
            if (plain && std::count(id.begin(), id.end(), '/') == 1 && id.front() != '/' && id.back() != '/') return id;
        }
    }
    return "";
}


// What the cut did besides removing experts, as the card's first sentence
// says it: a count cut leaves every other weight byte-identical; a width cut
// keeps rows of gate/up and requantises down (and, where the arch sizes it
// with the routed width, cuts the shared expert the same way).
std::string what_else_changed(const plan & p) {
    const int64_t width = cut_width(p);
    if (!width) return "every other weight unchanged and byte-identical.";
    const bool shared_cut = p.cuts_shared_expert();
    return "and every kept expert" + std::string(shared_cut ? " and the shared expert" : "") + " cut to " + std::to_string(width) +
           " of its " + std::to_string(p.width_n_ff) + " intermediate channels: the gate and up rows of the kept channels byte-identical, "
           "the down projections requantised from the kept columns; every other weight unchanged and byte-identical.";
}

// The card's shared-experts cell of the build: a width cut of an arch that
// sizes its shared experts as n_ff x count keeps their weights whole and
// writes the count S/K (moe/width.h), so a count that changed says why.
std::string shared_experts_of_cut(const card & c) {
    const moe::census & src = c.src.c, & cut = c.cut.c;
    std::string v = std::to_string(cut.n_expert_shared);
    if (cut.n_expert_shared == src.n_expert_shared || !cut_width(c.p) || cut.expert_ff_length == 0) return v;
    const uint64_t shared_width = (uint64_t) cut.n_expert_shared * cut.expert_ff_length;
    return v + " (the same " + std::to_string(shared_width) + " shared channels, counted in experts of " +
           std::to_string(cut.expert_ff_length) + ")";
}

std::string front_matter_and_census(const card & c) {
    const model_facts & src = c.src, & cut = c.cut;
    const plan & p = c.p;
    std::string name, license, ignored;
    src.m.kvs.get_string_or("general.name", "", name, ignored);
    if (name.empty()) name = util::stem_of(c.opt.source);
    const std::string repo = hf_repo_of(src.m);
    src.m.kvs.get_string_or("general.license", "", license, ignored);
    const double removed = 1.0 - (double) p.n_keep / (double) p.n_expert;
    std::string o;
    o += "---\n";
    o += "base_model: " + (repo.empty() ? std::string(k_fill_in) + "  # the Hugging Face id of the source model (org/name); its GGUF does not say" : repo) + "\n";
    o += "license: " + (license.empty() ? std::string(k_fill_in) + "  # the source model's licence; its GGUF does not say" : yaml_str(license)) + "\n";
    o += "library_name: gguf\n";
    o += "pipeline_tag: text-generation\n";
    o += "tags:\n  - moe\n  - expert-pruning\n  - reap\n  - gguf\n  - " + yaml_str(cut.c.arch) + "\n";
    for (const auto & [t, tc] : cut.c.types) o += "  - " + yaml_str(t) + "\n";
    o += "---\n\n";
    const int64_t width = cut_width(p);
    o += "# " + util::markdown_text(name) + ": " + std::to_string(p.n_keep) + " of " + std::to_string(p.n_expert) + " experts per MoE layer" +
         (width ? ", " + std::to_string(width) + " of " + std::to_string(p.width_n_ff) + " channels each" : "") + "\n\n";
    o += "> Fields marked `" + std::string(k_fill_in) + "` could not be known from the files: fill them in before publishing.\n";
    o += "> Everything else on this card was written by `reap report` from the files and receipts named in it.\n\n";
    o += "An expert-pruned build of " + code(util::base_name(c.opt.source)) + " (" + util::markdown_text(cut.c.arch) + "): " + pct(removed) +
         " of the routed experts removed from each of its " + std::to_string(p.layers.size()) + " MoE layers, " + what_else_changed(p) + " " +
         util::format_size(src.c.file_bytes) + " → " + util::format_size(cut.c.file_bytes) + ".\n\n";
    o += "## Source vs build\n\nFrom the files themselves (`reap inspect`).\n\n| | source | this build |\n|---|---:|---:|\n";
    census_row(o, "architecture", src.c.arch, cut.c.arch);
    census_row(o, "blocks (MoE)", std::to_string(src.c.n_layer) + " (" + std::to_string(src.c.moe_layers.size()) + ")",
               std::to_string(cut.c.n_layer) + " (" + std::to_string(cut.c.moe_layers.size()) + ")");
    census_row(o, "routed experts per MoE layer", std::to_string(src.c.n_expert), std::to_string(cut.c.n_expert));
    census_row(o, "experts used per token", std::to_string(src.c.n_expert_used), std::to_string(cut.c.n_expert_used));
    census_row(o, "shared experts", std::to_string(src.c.n_expert_shared), shared_experts_of_cut(c));
    if (width) census_row(o, "channels per expert", std::to_string(src.c.expert_ff_length), std::to_string(cut.c.expert_ff_length));
    if (src.c.n_expert_groups > 1) census_row(o, "expert groups (used)", std::to_string(src.c.n_expert_groups) + " (" + std::to_string(src.c.n_expert_groups_used) + ")", std::to_string(cut.c.n_expert_groups) + " (" + std::to_string(cut.c.n_expert_groups_used) + ")");
    census_row(o, "parameters", util::group_digits(src.n_params), util::group_digits(cut.n_params));
    census_row(o, "tensors", util::group_digits(src.c.n_tensors), util::group_digits(cut.c.n_tensors));
    census_row(o, "files", std::to_string(src.c.n_shards), std::to_string(cut.c.n_shards));
    census_row(o, "file bytes", util::format_size(src.c.file_bytes), util::format_size(cut.c.file_bytes));
    census_row(o, "routed-expert pool", util::format_size(src.c.expert_pool_bytes), util::format_size(cut.c.expert_pool_bytes));
    census_row(o, "dense (everything else)", util::format_size(src.c.dense_bytes), util::format_size(cut.c.dense_bytes));
    census_row(o, "one expert in one layer", util::format_size(src.c.expert_bytes_per_layer), util::format_size(cut.c.expert_bytes_per_layer));
    census_row(o, "bytes read per decoded token", util::format_size(src.c.decode_bytes_per_token), util::format_size(cut.c.decode_bytes_per_token));
    census_row(o, "tensor types", types_of(src.c), types_of(cut.c));
    o += "\n";
    return o;
}

std::string method_section(const card & c) {
    const plan & p = c.p;
    const pl::plan_provenance & pv = c.prov;
    const saliency_facts & sal = c.sal;
    std::string o = "## Method\n\n";
    o += "* **Criterion**: " + (pv.method.empty() ? std::string("not recorded in the plan") : code(pv.method) + (pv.method_description.empty() ? "" : ": " + pv.method_description)) + ".\n";
    o += "* **Keep rule**: the " + std::to_string(p.n_keep) + " highest-ranked experts of every MoE layer" +
         (c.src.c.n_expert_groups > 1 ? ", the same count in every expert group" : "") +
         (pv.minrank ? ", ranked by their best rank in any domain (consensus minrank)" : "") + ".";
    std::vector<std::string> req;
    for (const auto & [k, v] : pv.request) req.push_back(k + " " + v);
    if (!req.empty()) o += " Requested as " + code(util::join(req, ", ")) + ".";
    o += "\n";
    if (sal.have && sal.a.metrics == saliency::metric_set::weights) {
        o += "* **Calibration**: none. **Calibration-free**: the experts were scored from the model's weights alone (" +
             code(sal.tool.empty() ? std::string("reap score") : sal.tool) + ", AIMER: mean|w| / rms(w) of each expert's gate, up and "
             "down weights; the highest go first). No text was run through the model to choose them, so nothing here says which "
             "domains the kept experts serve: only the measurements below do. There are no token counts, super-expert norms or "
             "dead experts to report.\n";
        o += "* **Saliency kept**: " + pct(sal.share.mean) + " of the summed 1 - AIMER scores (mean over MoE layers), a property of "
             "the weights, not of any text.\n\n";
    } else if (sal.have) {
        o += "* **Calibration**: " + (sal.corpus_name.empty() ? std::string("corpus not named in the archive") : code(sal.corpus_name)) +
             (sal.corpus_sha256.empty() ? "" : " (sha256 " + code(sal.corpus_sha256.substr(0, 16) + "…") + ")") + ", by " +
             (sal.tool.empty() ? std::string("an unrecorded tool") : code(sal.tool)) + ". Domains and tokens:\n\n";
        o += "  | domain | tokens | scored by the plan | saliency kept |\n  |---|---:|:---:|---:|\n";
        for (size_t i = 0; i < sal.a.domains.size(); ++i) {
            const auto & d = sal.a.domains[i];
            const bool scored = std::find(sal.rank.domains.begin(), sal.rank.domains.end(), d.name) != sal.rank.domains.end();
            o += "  | " + util::markdown_text(d.name) + " | " + util::group_digits((uint64_t) d.n_tokens) + " | " + (scored ? "yes" : "no") + " | " + pct(sal.share_by_domain[i].second) + " |\n";
        }
        o += "\n* **Saliency kept**: " + pct(sal.share.mean) + " of the " + std::string(pl::method_name(sal.rank.share_method)) +
             " saliency over the plan's domains (mean over MoE layers; per layer " +
             pct(*std::min_element(sal.share.share.begin(), sal.share.share.end())) + " to " +
             pct(*std::max_element(sal.share.share.begin(), sal.share.share.end())) + "); per domain in the table above, each domain's own saliency on the same keep lists.\n";
        const pl::margin_summary ms = pl::summarize_margin(sal.receipts);
        if (ms.min > 0)
            o += "* **Safety margin**: no pruned expert ranks better than " + std::to_string(ms.min) + " of " + std::to_string(p.n_expert) +
                 " in any of the plan's domains, in any MoE layer (median layer: " + fmt("%.0f", ms.median) + "; the closest call: layer " +
                 std::to_string(ms.layer) + " expert " + std::to_string(ms.expert) + " in " + util::markdown_text(ms.domain) + ").\n";
        // super experts and dead experts
        std::vector<std::string> supers;
        for (const auto & x : sal.rank.super_candidates) {
            const plan_layer * l = p.find_layer(x.layer);
            const bool kept = l && std::count(l->keep.begin(), l->keep.end(), x.expert);
            supers.push_back("layer " + std::to_string(x.layer) + " expert " + std::to_string(x.expert) + " (max ‖out‖ " + fmt("%.4g", x.value) + (kept ? ", kept" : ", **not kept**") + ")");
        }
        o += "* **Super experts** (max output norm above " + fmt("%.4g", sal.rank.super_threshold) + "): " +
             (supers.empty() ? std::string("none") : util::join(supers, "; ")) + (sal.rank.opts.protect_super ? "; protected by the plan" : "; the plan did not protect them") + ".\n";
        size_t dead_dropped = 0, dead_kept = 0;
        for (const auto & x : sal.rank.never_routed) {
            const plan_layer * l = p.find_layer(x.layer);
            (l && std::count(l->keep.begin(), l->keep.end(), x.expert) ? dead_kept : dead_dropped)++;
        }
        o += "* **Dead experts** (never routed to in the plan's domains): " + std::to_string(sal.rank.never_routed.size()) +
             ", of which " + std::to_string(dead_dropped) + " dropped and " + std::to_string(dead_kept) + " kept.\n";
        o += "\n![Saliency heatmap](figures/saliency-heatmap.svg)\n\n![Retention curve](figures/retention.svg)\n\n![Expert usage per domain](figures/domain-usage.svg)\n\n";
        if (sal.stability && !sal.stability->points.empty()) {
            const auto & sc = *sal.stability;
            const auto & last = sc.points.back();
            const bool held = sc.points.size() >= 2 && last.stable && sc.points[sc.points.size() - 2].stable;
            o += "* **How many tokens were enough** (`reap calibrate --until-stable " + fmt("%.3g", sc.threshold) + "`, " +
                 std::to_string(sc.n_keep) + " kept per layer): " +
                 (held ? "the keep-list held at an overlap of at least " + fmt("%.3g", sc.threshold) +
                             " for two checkpoints in a row, and calibration stopped at " + util::group_digits(last.tokens) + " tokens."
                       : "the keep-list had not held at an overlap of " + fmt("%.3g", sc.threshold) + " when the corpus ended (" +
                             util::group_digits(last.tokens) + " tokens at the last checkpoint).") + "\n\n" +
                 "![Tokens spent vs keep-list stability](figures/calibration-stability.svg)\n\n";
        }
    } else {
        if (!pv.domains.empty()) o += "* **Domains scored** (from the plan): " + util::markdown_text(util::join(pv.domains, ", ")) + ".\n";
        if (pv.receipts.has_share) o += "* **Saliency kept** (as the plan records it): " + pct(pv.receipts.share_mean) + ".\n";
        o += "\n";
    }
    for (const auto & n : c.notes) o += "_" + n + "_\n\n";
    return o;
}


// What an eval's numbers are against: the source file, or another file of the
// same model (its header fingerprint is the source's at every quantisation:
// reap fit scores against a reference such as the F16 file) named as such.
std::string measured_against(const card & c, const eval_report & r) {
    // a mask measures the source with the plan's experts masked, not this build
    const std::string what = r.masked ? "the source with this plan's experts masked" : "this build";
    const std::string short_what = r.masked ? "masked" : "build";
    if (r.base_bytes == 0 || r.base_bytes == c.src.m.file_bytes()) {
        return ": KL divergence of " + what + " from the source, per token over the full vocabulary; top-1 agreement with the source; "
               "perplexity ratio (" + short_what + " / source).\n\n";
    }
    const std::string ref = code(util::base_name(r.base_path));
    return ": KL divergence of " + what + " from " + ref + ", per token over the full vocabulary; top-1 agreement with it; perplexity ratio " +
           "(" + short_what + " / " + ref + "). " + ref + " is the eval's reference: the same model as the source by its fingerprint (header and "
           "router weights), another file of it (" + util::group_digits((int64_t) r.base_bytes) + " bytes" +
           (r.base_files_sha256.empty() ? "" : ", sha256 " + code(r.base_files_sha256)) + "; the source has " +
           util::group_digits((int64_t) c.src.m.file_bytes()) + "), such as a higher-precision quantisation.\n\n";
}

std::string verified_sections(const card & c) {
    std::string o = "## Verified\n\n";
    for (const auto & v : c.verified) o += "* " + v + "\n";
    o += "\n";
    // the tables of this build's evals under Verified, those of masks (estimates) under Not verified
    auto tables = [&](bool masked) {
        for (const auto & e : c.evals) {
            if (e.r.masked != masked) continue;
            o += "**" + code(util::base_name(e.json_file)) + "**" + (masked ? " (a masked estimate)" : "") +
                 (e.r.input_path.empty() ? "" : " on " + code(util::base_name(e.r.input_path))) +
                 (e.r.input_sha256.empty() ? "" : " (sha256 " + code(e.r.input_sha256.substr(0, 16) + "…") + ")") +
                 measured_against(c, e.r) + eval_table(e) + "\n";
        }
    };
    tables(false);
    o += "## Not verified\n\n";
    for (const auto & v : c.unverified) o += "* " + v + "\n";
    o += "\n";
    tables(true);
    return o;
}

// The behaviour cells of one sweep row (needle n/m; loop, ended, distinct-4,
// agreement), "-" where that part did not run for the model.
std::string sweep_behaviour_cells(const sweep_record & s, std::optional<size_t> needle_n_exact, const generation_stats * g) {
    std::string o;
    if (s.needle) o += " " + (needle_n_exact ? std::to_string(*needle_n_exact) + "/" + std::to_string(s.needle->report.cells.size()) : std::string("-")) + " |";
    if (s.generate) {
        if (g) o += " " + pct(g->loop_rate) + " | " + pct(g->termination_rate) + " | " + fmt("%.4f", g->distinct_4) + " | " + fmt("%.1f", g->mean_agreement) + " |";
        else o += " - | - | - | - |";
    }
    return o;
}

// What the sweep's behaviour columns are: masked estimates of each size, never
// this build's measurement (the rule judge_behaviour applies to a masked eval).
std::string sweep_behaviour_note(const sweep_record & s) {
    std::string o = "The behaviour columns are **masked estimates**: each size was measured on the source with that size's removed experts "
                    "masked (as `reap eval --mask` measures a plan), not on a pruned file, so none of them is this build's own measurement "
                    "(that is an eval of this build's files, `reap eval -p` with `--needle` / `--generate`, given with `--eval`). The source:";
    if (s.needle) {
        const needle_report & r = s.needle->report;
        o += " needle " + std::to_string(r.models[0].n_exact()) + "/" + std::to_string(r.cells.size()) + " exact (" + std::to_string(r.cells.size()) +
             " cells over " + code(util::base_name(r.haystack_path)) + ", seed " + std::to_string(r.seed) + ", the question " +
             (r.chat ? "as a chat turn" : "as a completion") + ")" + (s.generate ? ";" : ".");
    }
    if (s.generate) {
        const generation_report & r = s.generate->report;
        const generation_stats b = r.stats(0, -1);
        o += " loop rate " + pct(b.loop_rate) + ", ended " + pct(b.termination_rate) + ", distinct-4 " + fmt("%.4f", b.distinct_4) +
             " (free generation after " + std::to_string(r.prompt_domain.size()) + " prompts of " + code(util::base_name(r.prompts_path)) +
             ", at most " + std::to_string(r.max_new) + " new tokens). Loop: the output ends in a span of >= " + std::to_string(k_loop_span) +
             " tokens said >= " + std::to_string(k_loop_repeats) + " times; ended: an end-of-generation token before the cap; agree: the mean "
             "number of leading tokens equal to the source's output.";
    }
    return o + "\n";
}

std::string sweep_section(const card & c) {
    const sweep_facts & sw = c.sw;
    if (!sw.have) return "";
    const bool behaviour = sw.s.needle || sw.s.generate;
    std::string o = "## Other sizes\n\nFrom the sweep " + code(util::base_name(sw.path)) + " (every size scored by masking its removed experts" +
                    (sw.widths ? " and, in a width cut, zeroing each kept expert's removed channels before its down projection," : "") +
                    " in the source" + (sw.s.input.file.empty() ? "" : ", on " + code(util::base_name(sw.s.input.file))) +
                    (sw.same_method ? "" : ", ranked by " + code(sw.s.saliency.method) + ", not this build's method") +
                    "; its plans are the sweep's own, not written or audited here):\n\n| N |" + (sw.widths ? " width |" : "") +
                    " file bytes | saliency kept | KLD mean | top-1 | PPL ratio |";
    std::string rule = std::string("\n|---:|") + (sw.widths ? "---:|" : "") + "---:|---:|---:|---:|---:|";
    if (sw.s.needle) {
        o += " needle (masked) |";
        rule += "---:|";
    }
    if (sw.s.generate) {
        o += " loop (masked) | ended (masked) | distinct-4 (masked) | agree (masked) |";
        rule += "---:|---:|---:|---:|";
    }
    o += rule + "\n";
    for (const auto & pt : sw.s.points) {
        const bool mine = is_this_point(sw, c.p, pt);
        o += "| " + std::to_string(pt.n_keep) + (mine ? (sw.widths ? " (this build)" : " (this N)") : "") + " | " +
             (!sw.widths ? "" : (pt.width > 0 ? std::to_string(pt.width) : "all (" + std::to_string(sw.n_ff) + ")") + " | ") +
             util::format_size(pt.predicted_bytes) + " | " +
             pct(pt.saliency_share) + " | " + fmt("%.4f", pt.overall.kld_mean) + " | " + pct(pt.overall.argmax_agree, 2) +
             " | " + fmt("%.4f", pt.overall.ppl_ratio) + " |";
        if (behaviour) {
            const sweep_point_behaviour b = sweep_behaviour_of(sw.s, pt.n_keep);
            o += sweep_behaviour_cells(sw.s, b.needle_model ? std::optional<size_t>(b.n_exact) : std::nullopt,
                                       b.generate_model ? &b.generation : nullptr);
        }
        o += "\n";
    }
    if (behaviour) o += "\n" + sweep_behaviour_note(sw.s);
    if (sw.widths) {
        o += "\nWidth: the intermediate channels every kept expert keeps, of its " + std::to_string(sw.n_ff) +
             ", chosen by the sweep's channel scores. A width cut's file bytes are those of the file `reap prune` writes, its down "
             "projections requantised; its scores leave that requantisation out.\n\n![KLD and top-1 against file size, one line per "
             "width](figures/sweep-kld.svg)\n\n";
    } else {
        o += "\n![KLD against N](figures/sweep-kld.svg)\n\n";
    }
    if (sw.s.sources.empty()) return o;
    const std::string against = sw.s.reference.model.empty() ? "the KLD base file " + code(util::base_name(sw.s.reference.kld_base))
                                                             : code(util::base_name(sw.s.reference.model));
    o += "### Which quantisation to cut\n\nThe sweep scored " + std::to_string(sw.s.sources.size()) +
         " quantisations of this model (the same router weights), each cut to each request from the one ranking, against " + against +
         ". Per request, the best source and its lead over the next:\n\n"
         "| request | best source | N | file bytes | KLD mean | top-1 | next best | KLD lead | top-1 lead |\n"
         "|---|---|---:|---:|---:|---:|---|---:|---:|\n";
    for (const sweep_frontier_entry & e : sw.s.frontier) {
        const bool mine = (int) e.best.source == sw.this_source && e.best.n_keep == sw.this_n_keep;
        o += "| " + util::markdown_text(e.request_kind + " " + e.request_text) + " | " + code(util::base_name(sw.s.sources[e.best.source].path)) +
             (mine ? " (this build)" : "") + " | " + std::to_string(e.best.n_keep) + " | " + util::format_size(e.best.bytes) + " | " +
             fmt("%.4f", e.best.kld_mean) + " | " + pct(e.best.top1, 2) + " | " +
             (e.runner_up ? code(util::base_name(sw.s.sources[e.runner_up->source].path)) + " (N " + std::to_string(e.runner_up->n_keep) +
                                ") | " + fmt("%.4f", e.runner_up->kld_mean - e.best.kld_mean) + " | " +
                                fmt("%+.2f", 100 * (e.best.top1 - e.runner_up->top1)) + " pts"
                          : std::string("- | - | -")) +
             " |\n";
    }
    if (sw.this_source < 0) {
        o += "\nThis build's source is none of the sweep's sources (matched by router weights and file size).\n";
    } else {
        o += "\nThis build is " + code(util::base_name(sw.s.sources[(size_t) sw.this_source].path)) +
             (sw.this_n_keep > 0 ? " at N = " + std::to_string(sw.this_n_keep) + ", a point of the sweep"
                                 : ", but its N = " + std::to_string(c.p.n_keep) + " is none of the sweep's points" +
                                       (sw.same_method ? "" : " (the sweep ranked by another method)")) +
             ".\n";
    }
    return o + "\n![KLD against file size, one line per source](figures/sweep-frontier.svg)\n\n";
}

std::string running_sections(const card & c) {
    const model_facts & src = c.src, & cut = c.cut;
    const report_options & opt = c.opt;
    std::string o;
    const std::string first = util::base_name(cut.m.shards[0].path);
    o += "## How to run\n\nWith llama.cpp (any build that runs " + code(cut.c.arch) + "), pointing `-m` at the first file";
    o += cut.c.n_shards > 1 ? " (the other " + std::to_string(cut.c.n_shards - 1) + " are found beside it):\n\n" : ":\n\n";
    // a file name is one shell word here, whatever it holds
    const std::string word = util::shell_word(first);
    o += "```\nllama-server -m " + word + " -c 8192 -ngl 99\nllama-cli    -m " + word + " -cnv\n```\n\n";
    o += "The router picks " + std::to_string(cut.c.n_expert_used) + " of the " + std::to_string(cut.c.n_expert) +
         " remaining experts per token, as the source picked " + std::to_string(src.c.n_expert_used) + " of " + std::to_string(src.c.n_expert) +
         "; no flag is needed for that. `-c`, `-ngl` and offloading (`-ot \"ffn_.*_exps=CPU\"`) are yours to choose.\n\n";

    o += "## Hardware\n\n";
    o += "* **Resident weights**: " + util::format_size(cut.c.file_bytes) + " (the files; the source needs " + util::format_size(src.c.file_bytes) +
         "). Add the KV cache for your context length and llama.cpp's compute buffers.\n";
    o += "* **Read per decoded token**: " + util::format_size(cut.c.decode_bytes_per_token) + " (the dense weights plus " + std::to_string(cut.c.n_expert_used) +
         " experts of every MoE layer; the source reads " + util::format_size(src.c.decode_bytes_per_token) +
         ": pruning shrinks what must be resident, not what a token reads).\n";
    o += "* **Decode speed bound** = memory bandwidth / bytes per token: ";
    {
        std::vector<std::string> v;
        for (double bw : {100e9, 400e9, 1000e9}) {
            const double rate = bw / (double) std::max<uint64_t>(1, cut.c.decode_bytes_per_token);
            v.push_back(fmt("%.0f GB/s", bw / 1e9) + " → " + (rate >= 100 ? util::group_digits((uint64_t) rate) : fmt("%.3g", rate)) + " tokens/s");
        }
        o += util::join(v, ", ") + " (an upper bound: compute, attention over the context and the KV cache come on top).\n\n";
    }

    o += "## SHA256SUMS\n\nChecked by this report against the files (`sha256sum -c SHA256SUMS`):\n\n```\n";
    // as sha256sum writes it, escapes and all; a byte a page cannot show
    // (a control, a byte that is not UTF-8) is shown as U+FFFD, and said
    bool shown_exactly = true;
    for (const auto & [h, n] : c.sums_lines) {
        const std::string line = util::sums_line(h, n);
        shown_exactly = shown_exactly && util::printable_utf8(line) == line;
        o += util::printable_utf8(line);
    }
    o += "```\n\n";
    if (!shown_exactly) {
        o += "A file name holds bytes this page cannot show (shown as \xEF\xBF\xBD): check with the SHA256SUMS file beside the build, "
             "not with a copy of these lines.\n\n";
    }
    o += "Plan: " + code(util::base_name(opt.plan)) + " (sha256 " + code(c.build.plan_sha256) + ")" +
         (c.sal.have ? "; saliency archive: " + code(util::base_name(c.sal.path)) + " (sha256 " + code(c.sal.sha256) + ")" : "") + ".\n\n";
    o += "---\n_Written by `reap report`" + (opt.tool_version.empty() ? std::string() : " " + opt.tool_version) + " (reap.cpp)._\n";
    return o;
}

}  // namespace reap::report::detail
