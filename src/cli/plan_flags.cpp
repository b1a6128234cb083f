// The ranking and sizing options of reap plan and reap sweep (see plan_flags.h).
#include "cli/plan_flags.h"

#include <algorithm>
#include <string>

namespace reap::cli {

namespace pl = reap::planner;

void declare_methods(options & t, std::vector<pl::method> & methods, const std::string & help) {
    t.custom("--methods", "M,M,...", help, [&methods](const std::string & v, std::string & err) {
        for (const std::string & name : reap::cli::split_list(v)) {
            pl::method m;
            if (!pl::parse_method(name, m)) {
                err = "--methods: unknown method '" + name + "' (" + pl::method_names_text() + ")";
                return false;
            }
            if (std::find(methods.begin(), methods.end(), m) != methods.end()) {
                err = "--methods: '" + name + "' is given twice";
                return false;
            }
            methods.push_back(m);
        }
        if (methods.empty()) err = "--methods: empty list";
        return !methods.empty();
    });
}

void declare_ranking(options & t, pl::rank_options & rank, bool & method_given, const char * seed_help) {
    t.section("how (score per expert over the chosen domains, higher = kept first):");
    std::string methods = "the score:";
    for (pl::method m : pl::all_methods()) {
        methods += std::string("\n  ") + pl::method_name(m) + ": " + pl::method_description(m) +
                   (m == pl::method::reap ? " [default; energy for imatrix archives, aimer for weights archives]" : "");
    }
    t.custom("--method", "M", methods, [&rank, &method_given](const std::string & v, std::string & err) {
        if (!pl::parse_method(v, rank.how)) {
            err = "--method: unknown method '" + v + "' (" + pl::method_names_text() + ")";
            return false;
        }
        method_given = true;
        return true;
    });
    t.custom("--domains", "a,b", "score over these domains of the archive (summed); default: all",
             [&rank](const std::string & v, std::string & err) {
                 rank.domains = reap::cli::split_list(v);
                 if (rank.domains.empty()) {
                     err = "--domains: empty list";
                     return false;
                 }
                 return true;
             });
    t.choice("--consensus", "M",
             "sum (default): one score over the summed domains; minrank: rank the experts within each domain "
             "separately and order them by their best rank in any domain (keeps what any domain needs most)",
             {{"sum", pl::consensus::sum}, {"minrank", pl::consensus::minrank}}, rank.cons);
    t.integer("--seed", "S", seed_help, 0, INT64_MAX, rank.seed);
    t.flag("--no-protect-super",
           "do not force-keep super experts. A super expert has a max output norm (max over all domains) above the "
           "99.5th percentile of all experts' max norms and above a tenth of the largest; by default they are kept "
           "before anything else (reap archives only)",
           rank.protect_super, false);
    t.prose(
        "Experts never routed to in any chosen domain are removed first. Ties break to the\n"
        "lower expert id; keep-lists are ascending. With a group-limited router\n"
        "(expert_group_count > 1), every group keeps N / groups experts (its best ones).\n"
        "The plan records, and the command prints, the super experts, the never-routed\n"
        "experts and the share of the total saliency (the method's score summed over the\n"
        "layer's experts) kept in each layer and on average over layers; and its receipts:\n"
        "the safety margin (the best rank, 1 = most salient, that any removed expert holds\n"
        "in any domain: minimum and median over layers, and per domain), the saliency kept\n"
        "per domain, the dead experts (no token in any domain) and the super experts kept.\n"
        "Long lists are summarised on the terminal; the plan file has them in full.\n");

}

void declare_width(options & t, int64_t & width, std::string & down_type) {
    t.integer("--width", "K",
              "also cut every kept expert to its K most salient intermediate channels (one width for the model: "
              "<arch>.expert_feed_forward_length becomes K); alone, every expert is kept. K must be a multiple of the "
              "block size of the down projections' type (256 for k-quants: reap prune requantises their rows). Needs "
              "an archive with channel scores (reap calibrate or reap imatrix --width-saliency; see --channel-score); "
              "refused for archs whose experts are not separate gate/up/down or whose shared experts llama.cpp sizes from the same key",
              1, INT64_MAX, width);
    t.text("--down-type", "T", "with --width: the type reap prune --down-type will requantise down to (K's block size)",
           down_type);
}

void declare_channel_score(options & t, pl::channel_score & by, bool & given) {
    t.custom("--channel-score", "S",
             "with a width cut: what ranks each kept expert's channels, summed over the chosen domains (also with "
             "--consensus minrank):\n  reap: sum g * |a_c| * ||W_down[:,c]|| (the channel's share of the expert's "
             "output) [default]\n  energy: sum a_c^2 (the default for imatrix archives, which hold only it)\n"
             "(a_c: the expert's intermediate channel c, the input of ffn_down_exps, over the tokens routed to it)",
             [&by, &given](const std::string & v, std::string & err) {
                 if (!pl::parse_channel_score(v, by)) {
                     err = "--channel-score: unknown score '" + v + "' (reap, energy)";
                     return false;
                 }
                 given = true;
                 return true;
             });
}

void declare_split_max_size(options & t, uint64_t & split_max_bytes) {
    t.custom("--split-max-size", "SIZE", "size as reap prune will split (units as --budget)",
             [&split_max_bytes](const std::string & v, std::string & err) {
                 if (!pl::parse_size(v, split_max_bytes, err)) {
                     err = "--split-max-size: " + err;
                     return false;
                 }
                 return true;
             });
}

} // namespace reap::cli
