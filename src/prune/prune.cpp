// The slicer of prune.h: turns (source model, plan) into an output_spec whose
// tensors are byte pieces of the source files, in plan order, for
// gguf::write_output to stream.
#include "prune/prune.h"

#include "prune/width.h"

namespace reap::prune {

plan_model_facts prune_facts(const gguf::model & m, const moe::layout & lay, const plan & p, const width_options & wopts) {
    if (!p.has_width()) return facts_of(lay);
    plan_model_facts facts = facts_of(lay, m);
    if (wopts.down_type) {   // K must suit the blocks of the type down is requantised to
        const gguf::type_info * ti = gguf::find_type(uint32_t(*wopts.down_type));
        facts.down_block = ti ? ti->block_size : 1;
        facts.down_type_name = ti ? ti->name : "?";
    }
    return facts;
}

bool make_pruned_spec(const gguf::model & m, const moe::layout & lay, const plan & p, const prune_options & opts,
                      gguf::output_spec & out, std::string & err) {
    return make_pruned_spec(m, lay, p, opts, width_options{}, out, err);
}

bool make_pruned_spec(const gguf::model & m, const moe::layout & lay, const plan & p, const prune_options & opts,
                      const width_options & wopts, gguf::output_spec & out, std::string & err) {
    if (!validate_plan(p, prune_facts(m, lay, p, wopts), err)) return false;
    gguf::output_spec spec;
    if (!moe::pruned_header(m, lay, p.n_keep, opts, spec, err)) return false;
    // the header leaves the sliced tensors without data: their bytes are the kept experts', in plan order
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const gguf::tensor_info & t = m.tensors[i];
        const moe::tensor_role & role = lay.roles[i];
        if (role.slice == moe::slice_kind::none) continue;
        const std::string who = "tensor '" + t.name + "'";
        const plan_layer * pl = p.find_layer(role.layer);
        if (!pl) {
            err = who + " carries the expert axis but its layer " + std::to_string(role.layer) + " is not in the plan";
            return false;
        }
        gguf::output_tensor & o = spec.tensors[i];
        const std::string & path = m.path_of(t);
        for (int64_t e : pl->keep) {
            uint64_t off = 0, size = 0;
            if (!moe::expert_range(role, lay.n_expert, e, off, size)) {
                err = who + ": no byte range for expert " + std::to_string(e);
                return false;
            }
            if (size == 0) continue;
            gguf::data_piece piece{path, t.file_offset + off, size};
            if (!o.pieces.empty() && o.pieces.back().offset + o.pieces.back().length == piece.offset) {
                o.pieces.back().length += size;   // consecutive experts: one run
            } else {
                o.pieces.push_back(std::move(piece));
            }
        }
    }
    if (opts.stamp) {
        for (int layer : lay.moe_layers) {
            const plan_layer * pl = p.find_layer(layer);
            if (!pl) {
                err = "MoE layer " + std::to_string(layer) + " is not in the plan";
                return false;
            }
            spec.kvs.set_i32_array(moe::source_expert_ids_key(layer), std::vector<int32_t>(pl->keep.begin(), pl->keep.end()));
        }
    }
    if (p.has_width() && !apply_width(m, lay, p, wopts, opts.stamp, spec, err)) return false;
    out = std::move(spec);
    return true;
}

bool make_pruned_spec(const gguf::model & m, const plan & p, const prune_options & opts, gguf::output_spec & out,
                      std::string & err) {
    moe::layout lay;
    if (!model_layout(m, lay, err)) return false;
    return make_pruned_spec(m, lay, p, opts, out, err);
}

} // namespace reap::prune
