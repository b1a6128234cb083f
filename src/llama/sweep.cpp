// reap sweep, the library half (see sweep.h): plan every size, score every
// plan by masking, and describe the result as the sweep record and a table.
#include "llama/sweep.h"

#include "corpus/corpus_line.h"
#include "formats/kld_receipt.h"
#include "llama/behaviour_run.h"
#include "llama/eval_models.h"

#include "plan/provenance.h"
#include "report/sweep_chart.h"
#include "saliency/archive.h"
#include "util/number_format.h"
#include "util/sha256.h"
#include "util/strings.h"

#include "util/disk.h"
#include "util/file.h"
#include "util/json.h"
#include "util/output_rule.h"
#include "util/path.h"
#include "util/recovery.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace reap {

namespace pl = reap::planner;

namespace {

const char * kind_name(pl::size_kind k) {
    return k == pl::size_kind::keep ? "keep" : k == pl::size_kind::ratio ? "ratio" : "budget";
}

} // namespace

// The plans' request of a sweep's options.
pl::source_plans_request plans_request(const sweep_options & o) {
    pl::source_plans_request q;
    q.saliency = o.saliency;
    q.sizes = o.sizes;
    q.widths = o.widths;
    q.down_type = o.down_type;
    if (o.channel_score_given) q.channel_by = o.channel_by;
    q.split_max_bytes = o.split_max_bytes;
    q.tool_version = o.tool_version;
    return q;
}

namespace {

// The record's points of one source: its plans and what they scored.
std::vector<sweep_record_point> record_points(const sweep_options & o, const std::string & source, const moe::layout & lay,
                                              const std::vector<pl::sweep_point> & points, const std::vector<eval_report> & reps,
                                              bool mtp) {
    std::vector<sweep_record_point> out;
    for (size_t i = 0; i < points.size() && i < reps.size(); ++i) {
        const pl::sweep_point & pt = points[i];
        sweep_record_point q;
        q.n_keep = pt.n_keep;
        q.width = pt.width;
        q.method = pt.method;
        q.request_kind = kind_name(pt.req.kind);
        q.request_text = pt.req.text;
        q.removed_fraction = (double) (lay.n_expert - pt.n_keep) / (double) lay.n_expert;
        q.predicted_bytes = pt.bytes;
        q.predicted_shards = pt.n_shards;
        q.saliency_share = pt.share;
        q.safety_margin = pt.margin;
        q.safety_margin_median = pt.margin_median;
        if (!o.plans_dir.empty()) q.plan = sweep_plan_path(o, source, pt.n_keep, pt.width, pt.method);
        q.overall = reps[i].overall;
        q.domains = reps[i].domains;
        if (mtp && reps[i].mtp_pruned) q.mtp_acceptance = reps[i].mtp_pruned->rate();
        out.push_back(q);
    }
    return out;
}

void fill_record(const sweep_options & o, const std::string & archive_sha, sweep_result & r) {
    sweep_record & s = r.record;
    const moe::layout & lay = r.rm.layout;
    const std::vector<eval_report> & reps = r.reports;
    s.tool = "reap sweep " + o.tool_version;
    s.model.path = o.eval.base_path;
    s.model.arch = lay.arch;
    s.model.header_sha256 = model_header_sha256(r.rm.model);
    s.model.n_expert = lay.n_expert;
    s.model.n_expert_used = lay.n_expert_used;
    s.model.moe_layers = lay.moe_layers.size();
    s.model.file_bytes = r.rm.model.file_bytes();
    s.saliency.file = o.saliency;
    s.saliency.sha256 = archive_sha;
    s.saliency.second_file = o.second_saliency;
    s.saliency.second_sha256 = o.second_saliency.empty() ? "" : r.second_archive_sha256;
    s.saliency.method = pl::method_name(r.rm.rank.opts.how);
    s.saliency.domains = r.rm.rank.domains;
    s.input.file = o.eval.input_path;
    s.input.n_ctx = reps.empty() ? 0 : reps[0].n_ctx;
    s.input.n_batch  = reps.empty() ? 0 : reps[0].n_batch;
    s.input.n_ubatch = reps.empty() ? 0 : reps[0].n_ubatch;
    s.input.n_windows = reps.empty() ? 0 : reps[0].n_windows;
    s.input.corpus = !reps.empty() && reps[0].corpus;
    // a model with MTP blocks: each cut's MTP draft acceptance (every cut is a mask of the base: measured whenever the base's is)
    const bool mtp = !reps.empty() && reps[0].mtp_blocks > 0 && reps[0].mtp_base;
    if (mtp) s.mtp_base_acceptance = reps[0].mtp_base->rate();
    s.points = record_points(o, o.eval.base_path, lay, r.points, reps, mtp);
    if (!o.several_sources()) return;
    s.reference.model = o.reference;
    s.reference.kld_base = o.kld_base;
    auto add_source = [&](const std::string & path, const pl::ranked_model & rm, const std::vector<pl::sweep_point> & points,
                          const std::vector<eval_report> & reports) {
        sweep_source src;
        src.path = path;
        src.header_sha256 = model_header_sha256(rm.model);
        src.router_sha256 = r.identity.router_sha256;   // checked equal for every source
        src.file_bytes = rm.model.file_bytes();
        src.points = record_points(o, path, rm.layout, points, reports, mtp);
        s.sources.push_back(std::move(src));
    };
    add_source(o.eval.base_path, r.rm, r.points, r.reports);
    for (const auto & other : r.others) add_source(other->path, other->rm, other->points, other->reports);
    s.frontier = sweep_frontier(s.sources);
}

// --methods: every size planned by each method, each ranked with the archive
// that holds its statistic (the first that does), all points in one list in
// the order of the methods; the first method's ranking stays in r.rm.
bool plan_method_points(const sweep_options & o, sweep_result & r, std::string & err) {
    if (o.behaviour() || o.several_sources()) {
        err = "--methods scores one source by KLD: not with --needle, --generate, a task file, several -m, --reference or --kld-base";
        return false;
    }
    if (!pl::open_ranked_model(o.eval.base_path, o.saliency, o.rank, false, r.rm, err) ||
        !util::sha256_file(o.saliency, r.archive_sha256, err)) {
        return false;
    }
    const saliency::archive first = r.rm.archive;
    saliency::archive second;
    if (!o.second_saliency.empty()) {
        if (!saliency::read_archive(o.second_saliency, second, err)) return false;
        if (!saliency::fingerprints_match(second.model, saliency::fingerprint_of(r.rm.identity), err)) {
            err = o.second_saliency + ": " + err;
            return false;
        }
        if (!util::sha256_file(o.second_saliency, r.second_archive_sha256, err)) return false;
    }
    pl::ranking first_rank;
    for (size_t i = 0; i < o.methods.size(); ++i) {
        const pl::method m = o.methods[i];
        std::string why, why2;
        const bool in_first = pl::method_fits(m, first, why);
        if (!in_first && (o.second_saliency.empty() || !pl::method_fits(m, second, why2))) {
            err = o.saliency + ": " + why + (o.second_saliency.empty() ? "" : "; " + o.second_saliency + ": " + why2);
            return false;
        }
        r.rm.archive = in_first ? first : second;
        pl::rank_options ro = o.rank;
        ro.how = m;
        if (!pl::rank_experts(r.rm.archive, r.rm.facts.n_group, ro, r.rm.rank, err)) return false;
        if (i == 0) first_rank = r.rm.rank;
        pl::source_plans_request req = plans_request(o);
        if (!in_first) req.saliency = o.second_saliency;
        std::vector<pl::sweep_point> pts;
        if (!pl::plan_source_points(req, r.rm, in_first ? r.archive_sha256 : r.second_archive_sha256, pts, err)) return false;
        for (auto & pt : pts) {
            pt.method = pl::method_name(m);
            r.points.push_back(std::move(pt));
        }
    }
    r.rm.archive = first;
    r.rm.rank = std::move(first_rank);
    return true;
}

// Several sources: each one the first's model (and the reference's), every N
// the same keep-set in every source, and no two sources with one plan name.
bool plan_other_sources(const sweep_options & o, sweep_result & r, std::string & err) {
    if (o.reference.empty() && o.kld_base.empty()) {
        err = "several sources (-m given " + std::to_string(1 + o.more_sources.size()) +
              " times) are scored against one reference: give --reference REF.gguf or --kld-base REF.kld";
        return false;
    }
    std::string text;
    if (!util::read_file(o.eval.input_path, "input", text, err)) return false;
    if (looks_like_jsonl_corpus(o.eval.input_path, text)) {
        err = "several sources are scored against the reference's rows, which are plain text windows: -f '" + o.eval.input_path +
              "' is a domain-tagged corpus (give its text as a plain file, or sweep one source per run)";
        return false;
    }
    r.identity = r.rm.identity;
    auto same_model = [&](const std::string & path, const moe::model_identity & id, const char * what) {
        const std::string diff = moe::identity_difference(r.identity, o.eval.base_path, id, path);
        if (!diff.empty()) err = std::string(what) + " '" + path + "' is not the model of -m '" + o.eval.base_path + "': " + diff;
        return diff.empty();
    };
    if (!o.reference.empty()) {
        gguf::model ref;
        moe::model_identity ref_id;
        if (!gguf::open_model(o.reference, ref, err)) return false;
        if (!moe::identity_of(ref, ref_id, err)) {
            err = o.reference + ": " + err;
            return false;
        }
        if (!same_model(o.reference, ref_id, "--reference")) return false;
    }
    std::map<int64_t, const plan *> keep_sets;
    for (const auto & pt : r.points) keep_sets[pt.n_keep] = &pt.p;
    std::set<std::string> plan_names = {sweep_plan_path(o, o.eval.base_path, 0)};
    for (size_t i = 0; i < o.more_sources.size(); ++i) {
        const std::string & path = o.more_sources[i];
        for (size_t k = 0; k <= i; ++k) {
            const std::string & before = k == 0 ? o.eval.base_path : o.more_sources[k - 1];
            if (util::same_entry(path, before)) {
                err = "-m '" + path + "' is the source '" + before + "' again: give each source once";
                return false;
            }
        }
        auto run = std::make_unique<sweep_source_run>();
        run->path = path;
        if (!pl::open_ranked_model(path, o.saliency, o.rank, o.method_given, run->rm, err)) return false;
        if (!same_model(path, run->rm.identity, "source")) return false;
        if (!pl::plan_source_points(plans_request(o), run->rm, r.archive_sha256, run->points, err)) return false;
        for (const auto & pt : run->points) {
            auto [it, fresh] = keep_sets.emplace(pt.n_keep, &pt.p);
            bool same = fresh || it->second->layers.size() == pt.p.layers.size();
            for (size_t l = 0; same && !fresh && l < pt.p.layers.size(); ++l) same = it->second->layers[l].keep == pt.p.layers[l].keep;
            if (!same) {
                err = "N = " + std::to_string(pt.n_keep) + " keeps other experts in '" + path + "' than in another source: the ranking differs";
                return false;
            }
        }
        if (!o.plans_dir.empty() && !plan_names.insert(sweep_plan_path(o, path, 0)).second) {
            err = "two sources named '" + util::stem_of(path) + "': their plans in --plans-dir would collide";
            return false;
        }
        r.others.push_back(std::move(run));
    }
    return true;
}

// Removes a file on every way out of a scope (the temp KLD base of
// --reference, and the receipt eval writes beside it).
struct remove_on_exit {
    std::string path;
    ~remove_on_exit() {
        if (path.empty()) return;
        util::current_disk().unlink(path);
        util::current_disk().unlink(kld_receipt_path(path));
    }
};

// Several sources: the reference's rows once (the KLD base file, written from
// --reference when missing), then every source's plans masked in it and
// scored against them.
bool score_sources(const sweep_options & o, sweep_result & r, std::string & err) {
    remove_on_exit temp;
    std::string kld = o.kld_base;
    struct stat st;
    const bool have_file = !kld.empty() && ::stat(kld.c_str(), &st) == 0;
    if (!have_file) {
        if (o.reference.empty()) {
            err = "--kld-base '" + kld + "' does not exist and there is no --reference REF.gguf to write it from";
            return false;
        }
        if (kld.empty()) {
            const char * env = getenv("TMPDIR");
            kld = (o.eval.tmp_dir.empty() ? (env && *env ? env : "/tmp") : o.eval.tmp_dir) + "/reap-sweep-reference-XXXXXX";
            const int fd = util::current_disk().make_temp(kld);
            if (fd < 0) {
                err = "cannot create a temp file for the reference's rows in '" + kld + "': " + strerror(errno);
                return false;
            }
            ::close(fd);
            util::current_disk().unlink(kld);   // eval writes it anew (and refuses to replace a file)
            temp.path = kld;
        }
        eval_options ref = o.eval;
        ref.base_path = o.reference;
        ref.kld_base_path = kld;
        std::vector<eval_report> none;
        if (!run_eval_candidates(ref, {}, none, err)) return false;
    }
    auto score = [&](const std::string & path, const std::vector<pl::sweep_point> & points, std::vector<eval_report> & reports) {
        eval_options e = o.eval;
        e.base_path = path;
        e.kld_base_path = kld;
        std::vector<eval_candidate> cands;
        for (const auto & pt : points) cands.push_back({"keep " + std::to_string(pt.n_keep) + " of " + path, true, &pt.p});
        return run_eval_candidates(e, cands, reports, err);
    };
    if (!score(o.eval.base_path, r.points, r.reports)) return false;
    for (auto & other : r.others) {
        if (!score(other->path, other->points, other->reports)) return false;
    }
    return true;
}

// --needle and --generate: the base once, then every size's mask, as reap
// eval --mask runs them (the haystack is -f; one --seed for the values, the
// draws and --method random).
bool score_behaviour(const sweep_options & o, const std::vector<eval_candidate> & cands, std::optional<needle_section> & needle,
                     std::optional<generate_section> & generate, std::optional<choice_section> & choice, std::string & err) {
    behaviour_request req;
    req.eval = o.eval;
    req.seed = o.rank.seed;
    if (!o.choice.tasks_path.empty()) req.choice = o.choice;
    if (o.do_needle) {
        req.needle = o.needle;
        req.needle->haystack_path = o.eval.input_path;
    }
    if (!o.generate.prompts_path.empty()) req.generate = o.generate;
    behaviour_result r;
    if (!run_behaviour(req, cands, r, err)) return false;
    needle = std::move(r.needle);
    generate = std::move(r.generate);
    choice = std::move(r.choice);
    return true;
}

} // namespace

std::string sweep_plan_path(const std::string & plans_dir, int64_t n_keep, int64_t width, const std::string & method) {
    return plans_dir + "/" + (method.empty() ? "" : method + "-") + "keep-" + std::to_string(n_keep) +
           (width > 0 ? "-width-" + std::to_string(width) : "") + ".json";
}

std::string sweep_plan_path(const sweep_options & o, const std::string & source, int64_t n_keep, int64_t width,
                            const std::string & method) {
    if (!o.several_sources()) return sweep_plan_path(o.plans_dir, n_keep, width, method);
    return o.plans_dir + "/" + util::stem_of(source) + "-keep-" + std::to_string(n_keep) + ".json";
}

std::vector<std::pair<std::string, std::string>> sweep_output_files(const sweep_options & o, const sweep_result & r,
                                                                    const std::string & plot, const std::string & output) {
    std::vector<std::pair<std::string, std::string>> files;
    if (!o.plans_dir.empty()) {
        for (const auto & pt : r.points) files.push_back({sweep_plan_path(o, o.eval.base_path, pt.n_keep, pt.width, pt.method), plan_text(pt.p)});
        for (const auto & other : r.others) {
            for (const auto & pt : other->points) files.push_back({sweep_plan_path(o, other->path, pt.n_keep), plan_text(pt.p)});
        }
    }
    if (!plot.empty()) files.push_back({plot, util::render_svg(sweep_result_chart(r))});
    if (!output.empty()) files.push_back({output, util::json_text(sweep_to_json(r.record), 2) + "\n"});
    return files;
}

bool plan_sweep_points(const sweep_options & o, sweep_result & r, std::string & err) {
    if (!o.methods.empty()) return plan_method_points(o, r, err);
    if (!o.widths.empty() && (o.behaviour() || o.several_sources())) {
        err = "--widths sweeps one source by KLD: not with --needle, --generate, a task file, several -m, --reference or --kld-base yet";
        return false;
    }
    if (o.behaviour() && o.several_sources()) {
        err = "--needle, --generate and the task files run on one source (its masks): not with several -m, --reference or --kld-base";
        return false;
    }
    if (!pl::open_ranked_model(o.eval.base_path, o.saliency, o.rank, o.method_given, r.rm, err)) return false;
    if (!util::sha256_file(o.saliency, r.archive_sha256, err) || !pl::plan_source_points(plans_request(o), r.rm, r.archive_sha256, r.points, err)) return false;
    return !o.several_sources() || plan_other_sources(o, r, err);
}

bool score_sweep(const sweep_options & o, sweep_result & r, std::string & err) {
    if (o.several_sources()) {
        if (!score_sources(o, r, err)) return false;
        fill_record(o, r.archive_sha256, r);
        return true;
    }
    std::vector<eval_candidate> cands;
    for (const auto & pt : r.points) {
        eval_candidate c;
        c.path = sweep_point_name(pt.n_keep, pt.width, pt.method);
        c.mask = true;
        c.in_memory = &pt.p;
        cands.push_back(c);
    }
    if (!run_eval_candidates(o.eval, cands, r.reports, err)) return false;
    std::optional<needle_section> needle;
    std::optional<generate_section> generate;
    std::optional<choice_section> choice;
    if (!score_behaviour(o, cands, needle, generate, choice, err)) return false;
    fill_record(o, r.archive_sha256, r);
    r.record.needle = std::move(needle);
    r.record.generate = std::move(generate);
    r.record.choice = std::move(choice);
    return true;
}

util::chart sweep_result_chart(const sweep_result & r) {
    if (!r.record.sources.empty()) return report::sweep_frontier_chart(r.record);
    if (sweep_has_widths(r.record)) return report::sweep_width_chart(r.record);
    if (sweep_has_methods(r.record)) return report::sweep_method_chart(r.record);
    report::sweep_chart_input in = report::sweep_chart_input_of(r.record);
    in.title = r.record.model.arch + ": cost of each cut (" + r.record.saliency.method + ", " + util::join(r.record.saliency.domains, ",") + ")";
    return report::sweep_chart(in);
}

namespace {

// The name each source goes by in the table: its file name when no two
// sources share one, else its path as given.
std::vector<std::string> source_labels(const sweep_record & s) {
    std::vector<std::string> labels;
    std::set<std::string> names;
    for (const sweep_source & src : s.sources) {
        labels.push_back(util::base_name(src.path));
        names.insert(labels.back());
    }
    if (names.size() == labels.size()) return labels;
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = s.sources[i].path;
    return labels;
}

} // namespace

void print_sweep_sources(FILE * out, const sweep_record & s) {
    fprintf(out, "reap sweep: %zu sources of %s (%" PRId64 " experts, top-%" PRId64 "), against %s%s%s\n", s.sources.size(),
            s.model.arch.c_str(), s.model.n_expert, s.model.n_expert_used,
            s.reference.model.empty() ? "" : ("reference " + s.reference.model).c_str(),
            !s.reference.model.empty() && !s.reference.kld_base.empty() ? ", " : "",
            s.reference.kld_base.empty() ? "" : ("KLD base " + s.reference.kld_base).c_str());
    fprintf(out, "  saliency %s: method %s; scored on %s: %" PRIu64 " windows of %" PRId64 "\n", s.saliency.file.c_str(),
            s.saliency.method.c_str(), s.input.file.c_str(), s.input.n_windows, s.input.n_ctx);
    const std::vector<std::string> label = source_labels(s);
    for (size_t i = 0; i < label.size(); ++i) {
        if (label[i] != s.sources[i].path) fprintf(out, "  source %s: %s\n", label[i].c_str(), s.sources[i].path.c_str());
    }
    // the columns as wide as their widest entry
    int request_w = (int) strlen("request"), source_w = (int) strlen("source");
    for (const sweep_frontier_entry & e : s.frontier) request_w = std::max(request_w, (int) (e.request_kind.size() + 1 + e.request_text.size()));
    for (const std::string & l : label) source_w = std::max(source_w, (int) l.size());
    fprintf(out, "\n  %-*s  %-*s %6s %22s %10s %8s\n", request_w, "request", source_w, "source", "N", "file size", "KLD mean", "top-1");
    for (const sweep_frontier_entry & e : s.frontier) {
        for (size_t i = 0; i < s.sources.size(); ++i) {
            for (const sweep_record_point & q : s.sources[i].points) {
                if (q.request_kind != e.request_kind || q.request_text != e.request_text) continue;
                fprintf(out, "  %-*s  %-*s %6" PRId64 " %22s %10.6f %7.3f%%\n", request_w, (e.request_kind + " " + e.request_text).c_str(),
                        source_w, label[i].c_str(), q.n_keep, util::format_size(q.predicted_bytes).c_str(), q.overall.kld_mean,
                        100.0 * q.overall.argmax_agree);
            }
        }
    }
    fprintf(out, "\n");
    for (const sweep_frontier_entry & e : s.frontier) {
        fprintf(out, "  %s %s: %s wins with N = %" PRId64 " (KLD %.6f, top-1 %.3f%%)", e.request_kind.c_str(), e.request_text.c_str(),
                label[e.best.source].c_str(), e.best.n_keep, e.best.kld_mean, 100.0 * e.best.top1);
        if (e.runner_up && e.runner_up->kld_mean == e.best.kld_mean && e.runner_up->top1 == e.best.top1) {
            // the same numbers: no lead to state (two copies of one file score alike)
            fprintf(out, ", tied with %s (N = %" PRId64 ": the same KLD and top-1; the first listed is named)",
                    label[e.runner_up->source].c_str(), e.runner_up->n_keep);
        } else if (e.runner_up) {
            fprintf(out, ", by %.6f nats of KLD and %+.3f points of top-1 over %s (N = %" PRId64 ")",
                    e.runner_up->kld_mean - e.best.kld_mean, 100.0 * (e.best.top1 - e.runner_up->top1),
                    label[e.runner_up->source].c_str(), e.runner_up->n_keep);
        }
        fprintf(out, "\n");
    }
}

namespace {

// --needle / --generate: a column group per size (and the base), each
// number from the record's sections (sweep_behaviour_of).
// A task file: a row per size (and the base), accuracy, interval, flips, p.
void print_sweep_choice(FILE * out, const sweep_record & s) {
    if (!s.choice) return;
    fprintf(out, "\n  tasks: ");
    choice_report_print(out, s.choice->report);
}

void print_sweep_behaviour(FILE * out, const sweep_record & s) {
    print_sweep_choice(out, s);
    if (!s.needle && !s.generate) return;
    fprintf(out, "\n  behaviour:");
    if (s.needle) fprintf(out, " needle grid of %zu cells over %s (exact answers)", s.needle->report.cells.size(), s.input.file.c_str());
    if (s.needle && s.generate) fprintf(out, ";");
    if (s.generate) {
        fprintf(out, " free generation after %zu prompts of %s, at most %d new tokens", s.generate->report.prompt_domain.size(),
                s.generate->report.prompts_path.c_str(), s.generate->report.max_new);
    }
    fprintf(out, "\n  %6s %9s %8s %8s %10s %9s\n", "N", "needle", "loop", "ended", "distinct-4", "agree");
    auto row = [&](const std::string & n, std::optional<size_t> nm, size_t n_exact, std::optional<size_t> gm, const generation_stats & g) {
        const std::string needle = nm ? std::to_string(n_exact) + "/" + std::to_string(s.needle->report.cells.size()) : "-";
        if (!gm) {
            fprintf(out, "  %6s %9s %8s %8s %10s %9s\n", n.c_str(), needle.c_str(), "-", "-", "-", "-");
            return;
        }
        fprintf(out, "  %6s %9s %7.1f%% %7.1f%% %10.4f %9.2f\n", n.c_str(), needle.c_str(), 100.0 * g.loop_rate, 100.0 * g.termination_rate,
                g.distinct_4, g.mean_agreement);
    };
    row("base", s.needle ? std::optional<size_t>(0) : std::nullopt, s.needle ? s.needle->report.models[0].n_exact() : 0,
        s.generate ? std::optional<size_t>(0) : std::nullopt, s.generate ? s.generate->report.stats(0, -1) : generation_stats());
    for (const auto & q : s.points) {
        const sweep_point_behaviour b = sweep_behaviour_of(s, q.n_keep);
        row(std::to_string(q.n_keep), b.needle_model, b.n_exact, b.generate_model, b.generation);
    }
    if (s.generate) {
        fprintf(out, "  (loop: outputs ending in a span of >= %d tokens said >= %d times; ended: an end-of-generation token before the cap;\n"
                     "   agree: mean leading tokens equal to the base's output; every text in the JSON)\n", k_loop_span, k_loop_repeats);
    }
}

} // namespace

void print_sweep(FILE * out, const sweep_options & o, const sweep_result & r) {
    const sweep_record & s = r.record;
    if (!s.sources.empty()) return print_sweep_sources(out, s);
    const eval_report * first = r.reports.empty() ? nullptr : &r.reports[0];
    fprintf(out, "reap sweep: %s (%s, %" PRIu64 " MoE layers, %" PRId64 " experts, top-%" PRId64 "), %s source\n", s.model.path.c_str(),
            s.model.arch.c_str(), s.model.moe_layers, s.model.n_expert, s.model.n_expert_used, util::format_size(s.model.file_bytes).c_str());
    const std::string archives = o.saliency + (o.second_saliency.empty() ? "" : " and " + o.second_saliency);
    const std::string how = sweep_has_methods(s) ? "methods " + util::join(sweep_methods(s), ",") : "method " + s.saliency.method;
    fprintf(out, "  saliency %s: %s, domains %s; scored on %s: %zu tokens in %zu windows, base PPL %.4f\n\n", archives.c_str(),
            how.c_str(), util::join(s.saliency.domains, ",").c_str(), s.input.file.c_str(), first ? first->overall.n_tokens : 0,
            first ? first->n_windows : 0, first ? first->overall.ppl_base : 0.0);
    // width cuts: a width column (K, or "all" for every channel kept); methods: a method column first
    const bool widths = sweep_has_widths(s), methods = sweep_has_methods(s);
    auto lead = [&](const sweep_record_point & q) {
        std::string cell = methods ? "  " + q.method + std::string(9 - std::min<size_t>(9, q.method.size()), ' ') : std::string();
        char n[32];
        snprintf(n, sizeof n, "%6" PRId64, q.n_keep);
        cell += std::string("  ") + n;
        if (widths) {
            const std::string w = q.width > 0 ? std::to_string(q.width) : "all";
            cell += " " + std::string(6 - std::min<size_t>(6, w.size()), ' ') + w;
        }
        return cell;
    };
    const std::string head = std::string(methods ? "  method   " : "") + "       N" + (widths ? "  width" : "");
    fprintf(out, "%s %8s %22s %9s %7s %10s %10s %10s %8s %10s\n", head.c_str(), "removed", "predicted size",
            "saliency", "margin", "KLD mean", "median", "p99", "top-1", "PPL ratio");
    for (const auto & q : s.points) {
        const eval_metrics & m = q.overall;
        const std::string margin = q.safety_margin > 0 ? std::to_string(q.safety_margin) : "-";
        fprintf(out, "%s %7.1f%% %22s %8.2f%% %7s %10.6f %10.6f %10.6f %7.3f%% %10.5f\n", lead(q).c_str(), 100.0 * q.removed_fraction,
                util::format_size(q.predicted_bytes).c_str(), 100.0 * q.saliency_share, margin.c_str(), m.kld_mean, m.kld_median, m.kld_p99,
                100.0 * m.argmax_agree, m.ppl_ratio);
    }
    fprintf(out, "  (margin: the best rank, 1 = most salient, any removed expert holds in any domain, in any layer; each\n"
                 "   plan's receipts in full: --plans-dir)\n");
    if (widths) {
        fprintf(out, "  (width: the channels every kept expert keeps, ranked by the archive's channel scores; the predicted size is\n"
                     "   the width-cut file's, its down projections requantised%s)\n",
                o.down_type.empty() ? " to their own type" : (" to " + o.down_type).c_str());
    }
    if (!s.points.empty() && !s.points[0].domains.empty()) {
        fprintf(out, "\n  per domain: KLD mean / top-1\n%s", head.c_str());
        for (const auto & d : s.points[0].domains) fprintf(out, " %20s", d.first.c_str());
        fprintf(out, "\n");
        for (const auto & q : s.points) {
            fprintf(out, "%s", lead(q).c_str());
            for (const auto & d : q.domains) fprintf(out, "   %9.5f /%6.2f%%", d.second.kld_mean, 100.0 * d.second.argmax_agree);
            fprintf(out, "\n");
        }
    }
    for (const auto & pt : r.points) {
        if (!pt.note.empty()) fprintf(out, "  note (N = %" PRId64 "): %s\n", pt.n_keep, pt.note.c_str());
    }
    print_sweep_behaviour(out, s);
    if (s.mtp_base_acceptance) {
        fprintf(out, "\n  MTP draft acceptance (greedy, first draft token): base %.3f%%", 100.0 * *s.mtp_base_acceptance);
        for (const auto & q : s.points) fprintf(out, ", N=%" PRId64 " %.3f%%", q.n_keep, q.mtp_acceptance ? 100.0 * *q.mtp_acceptance : -100.0);
        fprintf(out, "\n");
    }
}

bool run_sweep(const sweep_request & q, sweep_result & r, std::vector<std::string> & written, std::string & err) {
    written.clear();
    const sweep_options & o = q.sw;
    // the output rule (util/output_rule.h): no output is an input, nor the other output
    std::vector<std::pair<std::string, std::string>> inputs = {{"model", o.eval.base_path}, {"saliency archive", o.saliency},
        {"input", o.eval.input_path}, {"reference", o.reference}, {"KLD base", o.kld_base}, {"prompts", o.generate.prompts_path}};
    for (const std::string & m : o.more_sources) inputs.push_back({"source", m});
    if (!o.second_saliency.empty()) inputs.push_back({"saliency archive", o.second_saliency});
    for (const std::string * out : {&q.output, &q.plot}) {
        if (!out->empty() && !util::check_output(*out, inputs, q.force, err)) return false;
    }
    if (!q.output.empty() && util::same_entry(q.output, q.plot)) {
        err = "--plot is the output '" + q.output + "'";
        return false;
    }
    if (!plan_sweep_points(o, r, err)) return false;
    // where the plans go, before the scoring: not an input, not the JSON or the chart, not each other
    std::vector<std::pair<std::string, std::string>> outputs = {{"output", q.output}, {"chart (--plot)", q.plot}};
    for (const auto & f : sweep_output_files(o, r, "", "")) {
        if (!util::check_output(f.first, inputs, q.force, err) || !util::check_not_input(f.first, outputs, err)) {
            err += " (give --plans-dir another folder, or -o another name)";
            return false;
        }
        outputs.push_back({"plan", f.first});
    }
    // a killed run's journal where the outputs go is completed now, and one
    // that is not reap's refused now: before the scoring, not after it
    std::set<std::string> dirs;
    for (const auto & out : outputs) {
        if (!out.second.empty()) dirs.insert(util::dir_of(out.second));
    }
    for (const std::string & d : dirs) {
        struct stat st;
        if (::stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && util::recover_dir(d, err) < 0) return false;
    }
    if (!score_sweep(o, r, err)) return false;
    const auto files = sweep_output_files(o, r, q.plot, q.output);
    if (!pl::publish_sweep_files(o.plans_dir, files, err)) return false;
    for (const auto & f : files) written.push_back(f.first);
    return true;
}

} // namespace reap
