// reap prune --imatrix: slicing a llama-imatrix file to a plan's keep lists,
// and the coverage receipt of the kept experts. See imatrix_slice.h.
#include "prune/imatrix_slice.h"
#include "moe/layout_gguf.h"
#include "moe/width.h"
#include "util/output_rule.h"
#include "util/file.h"
#include "util/path.h"
#include "util/sha256.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace reap::prune {

namespace {

void summarise(const std::vector<int64_t> & v, int64_t & mn, int64_t & mx, double & mean, double & median) {
    if (v.empty()) return;
    std::vector<int64_t> s(v);
    std::sort(s.begin(), s.end());
    mn = s.front();
    mx = s.back();
    double sum = 0;
    for (int64_t x : s) sum += (double) x;
    mean = sum / (double) s.size();
    const size_t n = s.size();
    median = n % 2 ? (double) s[n / 2] : 0.5 * ((double) s[n / 2 - 1] + (double) s[n / 2]);
}

}  // namespace

std::vector<coverage_receipt::expert_ref> coverage_receipt::at_most(int64_t threshold) const {
    std::vector<expert_ref> out;
    for (const auto & l : layers) {
        for (size_t i = 0; i < l.counts.size(); ++i) {
            // unknown (legacy, has data) counts as at least 1
            const int64_t c = l.counts[i] < 0 ? 1 : l.counts[i];
            if (l.has_entries && c <= threshold) out.push_back({l.layer, (int64_t) i, l.keep[i], l.counts[i]});
        }
    }
    return out;
}

std::vector<coverage_receipt::expert_ref> coverage_receipt::below(int64_t required) const {
    return at_most(required - 1);
}

// A width plan's channel lists for an entry whose values are per intermediate
// channel of each expert (ffn_down_exps); null for every other entry or plan.
static bool width_channels_of(const std::string & head, const std::string & name, const gguf::tensor_info & t, const plan & p,
                              const plan_layer & pl, int layer, const std::vector<std::vector<int64_t>> *& channels,
                              std::string & err) {
    channels = nullptr;
    if (!p.has_width() || !moe::width_cuts_columns(name, false)) return true;
    if (t.ne[0] != p.width_n_ff || pl.channels.size() != pl.keep.size()) {
        err = head + ": entry '" + name + "' has " + std::to_string(t.ne[0]) + " channels per expert, the plan cuts " +
              std::to_string(p.width_n_ff) + "-channel experts (layer " + std::to_string(layer) + ")";
        return false;
    }
    channels = &pl.channels;
    return true;
}

// The shared expert's down entry of a width plan that cuts it (llama4): one
// matrix of n_ff values, cut to the layer's shared channels as a kept expert's.
static bool add_shared_down(const std::string & head, const std::string & name, const gguf::tensor_info & t,
                            const saliency::imatrix_entry & en, bool legacy, const plan & p, int layer, imatrix_slice & out,
                            std::string & err) {
    static const std::vector<int64_t> k_one_matrix{0};
    const plan_layer * pl = p.find_layer(layer);
    if (t.ne[0] != p.width_n_ff || en.n_values != t.ne[0] || (!legacy && en.n_mat != 1)) {
        err = head + " is for another model: entry '" + name + "' has " + std::to_string(en.n_values) +
              " values, the model's tensor has shape " + t.shape_string() + " and the plan cuts " +
              std::to_string(p.width_n_ff) + "-channel experts";
        return false;
    }
    if (!pl || int64_t(pl->shared_channels.size()) != p.width_keep) {
        err = "the plan has no shared-expert channels for layer " + std::to_string(layer) + " (entry '" + name + "')";
        return false;
    }
    out.shared_lists.push_back({pl->shared_channels});
    out.sliced.push_back(name);
    out.keep.push_back(&k_one_matrix);
    out.channels.push_back(&out.shared_lists.back());
    out.n_mat.push_back(1);
    return true;
}

bool check_shared_down_entry(const std::string & path, const saliency::imatrix_file & file, const gguf::model & model,
                             const moe::layout & lay, const width_options & w, std::string & err) {
    if (!moe::width_cuts_shared(model, lay)) return true;
    for (const gguf::tensor_info & t : model.tensors) {
        if (!moe::width_is_shared(t.name) || !moe::width_cuts_columns(t.name, true)) continue;
        const gguf::tensor_type type = width_down_type(t, w);
        if (needs_importance(type) && !file.entries.count(t.name)) {
            err = "imatrix '" + path + "' has no entry '" + t.name + "': quantising the shared expert's cut down projection to " +
                  gguf::type_name(type) + " needs it";
            return false;
        }
    }
    return true;
}

bool prepare_imatrix_slice(const std::string & path, const gguf::model & model, const moe::layout & lay,
                           const plan & p, imatrix_slice & out, std::string & err) {
    out = imatrix_slice();
    out.source_path = path;
    out.n_expert = lay.n_expert;
    if (!saliency::read_imatrix(path, out.file, err, lay.n_expert)) return false;
    const saliency::imatrix_file & f = out.file;
    const std::string head = "imatrix '" + path + "'";
    const bool shared_cut = p.has_width() && moe::width_cuts_shared(model, lay);

    // Which entries carry the expert axis: the layout table says, per model tensor.
    std::map<int, std::vector<std::string>> layer_entries;   // MoE layer -> its expert entries present
    for (const std::string & name : f.order) {
        const saliency::imatrix_entry & en = f.entries.at(name);
        const gguf::tensor_info * t = model.find_tensor(name);
        if (!t) {
            err = head + " is for another model: entry '" + name + "' names no tensor of '" + model.shards[0].path + "'";
            return false;
        }
        const moe::tensor_role & role = lay.roles[(size_t) (t - model.tensors.data())];
        const uint64_t nvals = (uint64_t) en.n_values;
        if (role.kind == moe::tensor_kind::expert_weight) {
            const uint64_t want = (uint64_t) t->ne[0] * (uint64_t) lay.n_expert;
            if ((!f.legacy && en.n_mat != lay.n_expert) || nvals != want) {
                err = head + " is for another model: entry '" + name + "' has " + std::to_string(nvals) + " values" +
                      (f.legacy ? "" : " in " + std::to_string(en.n_mat) + " matrices") + ", the model's tensor " +
                      t->shape_string() + " wants " + std::to_string(want) + " in " + std::to_string(lay.n_expert);
                return false;
            }
            const plan_layer * pl = p.find_layer(role.layer);
            if (!pl) {
                err = "the plan has no keep list for layer " + std::to_string(role.layer) + " (entry '" + name + "')";
                return false;
            }
            const std::vector<std::vector<int64_t>> * channels = nullptr;
            if (!width_channels_of(head, name, *t, p, *pl, role.layer, channels, err)) return false;
            out.sliced.push_back(name);
            out.keep.push_back(&pl->keep);
            out.channels.push_back(channels);
            out.n_mat.push_back(lay.n_expert);
            layer_entries[role.layer].push_back(name);
        } else if (shared_cut && moe::width_is_shared(name) && moe::width_cuts_columns(name, true)) {
            if (!add_shared_down(head, name, *t, en, f.legacy, p, role.layer, out, err)) return false;
        } else if (role.slice != moe::slice_kind::none && role.kind != moe::tensor_kind::router_weight) {
            // (the router's entry is per input channel: its expert axis is the output rows, untouched)
            err = head + ": entry '" + name + "' is for a per-expert " + moe::kind_name(role.kind) +
                  ", which no matrix multiplication reads: not a llama-imatrix file of this model";
            return false;
        } else if (t->ne[0] <= 0 || nvals % (uint64_t) t->ne[0] != 0 || (!f.legacy && en.n_mat != 1)) {
            err = head + " is for another model: entry '" + name + "' has " + std::to_string(nvals) +
                  " values, the model's tensor has shape " + t->shape_string();
            return false;
        }
    }
    if (out.sliced.empty()) {
        err = head + " has no per-expert entries (ffn_*_exps): it cannot give the kept experts their importance";
        return false;
    }
    // Every MoE layer must have an entry for each of its expert weights (nextn
    // blocks, which llama.cpp does not run, may have none).
    coverage_receipt & cov = out.coverage;
    cov.counts_known = !f.legacy;
    cov.n_keep = p.n_keep;
    std::vector<int64_t> all;
    for (int l : lay.moe_layers) {
        std::vector<std::string> want;
        for (size_t i = 0; i < model.tensors.size(); ++i) {
            if (lay.roles[i].layer == l && lay.roles[i].kind == moe::tensor_kind::expert_weight) {
                want.push_back(model.tensors[i].name);
            }
        }
        const auto & have = layer_entries[l];
        layer_coverage lc;
        lc.layer = l;
        if (const plan_layer * pl = p.find_layer(l)) lc.keep = pl->keep;
        if (have.empty() && lay.is_mtp(l)) {
            lc.has_entries = false;
            cov.layers.push_back(lc);
            continue;
        }
        for (const std::string & w : want) {
            if (!f.entries.count(w)) {
                err = head + " lacks the expert entry '" + w + "' (MoE layer " + std::to_string(l) + ")" +
                      (f.legacy ? ": legacy files leave out tensors that saw no data" : "") +
                      "; the pruned model's experts would be quantised without it";
                return false;
            }
        }
        const plan_layer * pl = p.find_layer(l);
        if (!pl) {
            err = "the plan has no keep list for MoE layer " + std::to_string(l);
            return false;
        }
        for (int64_t src : pl->keep) {
            int64_t c = -1;
            if (f.legacy) {
                const std::string down = "blk." + std::to_string(l) + ".ffn_down_exps.weight";
                const auto it = f.entries.find(down);
                const saliency::imatrix_entry * en = it == f.entries.end() ? nullptr : &it->second;
                if (en && en->ncall == 0) c = 0;
                else if (en && en->mat_all_ncall.size() == (size_t) lay.n_expert && en->mat_all_ncall[(size_t) src]) c = 0;
            } else {
                for (const std::string & w : want) {
                    const int64_t v = (int64_t) f.entries.at(w).counts[(size_t) src];
                    c = c < 0 ? v : std::min(c, v);
                }
            }
            lc.counts.push_back(c);
        }
        if (cov.counts_known) {
            summarise(lc.counts, lc.min, lc.max, lc.mean, lc.median);
            all.insert(all.end(), lc.counts.begin(), lc.counts.end());
        }
        cov.layers.push_back(std::move(lc));
    }
    if (cov.counts_known) summarise(all, cov.min, cov.max, cov.mean, cov.median);
    if (!f.legacy && !gguf::open_model(path, out.gguf_source, err)) return false;
    return true;
}

namespace {

// The values of source expert `e` of sliced entry `i` (n_values / n_expert floats), read from the file.
bool read_expert_values(const imatrix_slice & s, size_t i, int64_t e, std::vector<float> & row, std::string & err) {
    const std::string & name = s.sliced[i];
    const saliency::imatrix_entry & en = s.file.entries.at(name);
    const int64_t n_mat = s.n_mat[i];
    const uint64_t per = (uint64_t) en.n_values / (uint64_t) n_mat;
    row.assign(per, 0.0f);
    if (!s.file.legacy) {
        const gguf::tensor_info * t = s.gguf_source.find_tensor(name + ".in_sum2");
        if (!t || t->type != gguf::tensor_type::F32 || (uint64_t) t->ne[0] != per || t->ne[1] != n_mat) {
            err = "imatrix '" + s.source_path + "': entry '" + name + ".in_sum2' is not [" + std::to_string(per) + ", " +
                  std::to_string(n_mat) + "] f32 (changed since it was read?)";
            return false;
        }
        return gguf::read_tensor_bytes(s.gguf_source, *t, (uint64_t) e * per * sizeof(float), per * sizeof(float),
                                       row.data(), err);
    }
    const int fd = util::open_input(s.source_path, err, "imatrix");
    if (fd < 0) return false;
    const bool ok = util::pread_full(fd, row.data(), per * sizeof(float), en.values_offset + (uint64_t) e * per * sizeof(float));
    ::close(fd);
    if (!ok) err = "imatrix '" + s.source_path + "': read error in entry '" + name + "'";
    return ok;
}

// The index of `name` in s.sliced, or s.sliced.size().
size_t sliced_index(const imatrix_slice & s, const std::string & name) {
    return (size_t) (std::find(s.sliced.begin(), s.sliced.end(), name) - s.sliced.begin());
}

// Output expert k's values of sliced entry i: its kept channels (a down entry of a width plan), or all.
bool kept_values(const imatrix_slice & s, size_t i, size_t k, std::vector<float> & out, std::string & err) {
    std::vector<float> row;
    if (!read_expert_values(s, i, (*s.keep[i])[k], row, err)) return false;
    if (!s.channels[i]) {
        out = std::move(row);
        return true;
    }
    const std::vector<int64_t> & ch = (*s.channels[i])[k];
    out.resize(ch.size());
    for (size_t j = 0; j < ch.size(); ++j) {
        if (ch[j] < 0 || (uint64_t) ch[j] >= row.size()) {
            err = "entry '" + s.sliced[i] + "': channel " + std::to_string(ch[j]) + " out of range [0, " +
                  std::to_string(row.size()) + ")";
            return false;
        }
        out[j] = row[(size_t) ch[j]];
    }
    return true;
}

}  // namespace

bool kept_importance(const imatrix_slice & s, const std::string & name, size_t k, std::vector<float> & out,
                     std::string & err) {
    const size_t i = sliced_index(s, name);
    if (i == s.sliced.size() || k >= s.keep[i]->size()) {
        err = "imatrix '" + s.source_path + "' has no entry '" + name + "' for output expert " + std::to_string(k);
        return false;
    }
    if (!kept_values(s, i, k, out, err)) return false;
    const saliency::imatrix_entry & en = s.file.entries.at(name);
    // llama-quantize's normalisation (tools/quantize: load_imatrix)
    float div = 1.0f;
    if (!s.file.legacy) {
        const double c = en.counts[(size_t) (*s.keep[i])[k]];
        if (c <= 0) {
            std::fill(out.begin(), out.end(), 1.0f);
            return true;
        }
        div = (float) c;
    } else if (en.ncall > 0) {
        div = (float) en.ncall;
    }
    for (float & v : out) {
        if (!std::isfinite(v) || v < 0) {
            err = "imatrix '" + s.source_path + "': entry '" + name + "' holds " + std::to_string(v) +
                  " (importance values are finite and >= 0)";
            return false;
        }
        v /= div;
    }
    return true;
}

std::string default_imatrix_out(const std::string & model_out, bool legacy) {
    std::string stem = model_out;
    if (util::ends_with(stem, ".gguf")) stem.resize(stem.size() - 5);
    return stem + (legacy ? ".imatrix.dat" : ".imatrix.gguf");
}

namespace {

bool write_gguf_slice(const imatrix_slice & s, const std::string & path, bool force, bool sync, std::string & err,
                      std::vector<util::durable_file> * stage, std::vector<std::string> * stage_sha256) {
    gguf::model src;
    if (!gguf::open_model(s.source_path, src, err)) return false;
    gguf::output_spec spec = gguf::spec_from_model(src);
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < s.sliced.size(); ++i) index_of[s.sliced[i]] = i;
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
        const gguf::tensor_info & t = src.tensors[i];
        std::string base = t.name;
        const bool sums = util::ends_with(base, ".in_sum2");
        if (sums) base.resize(base.size() - 8);
        else if (util::ends_with(base, ".counts")) base.resize(base.size() - 7);
        const auto it = index_of.find(base);
        if (it == index_of.end()) continue;
        const std::vector<int64_t> & keep = *s.keep[it->second];
        gguf::output_tensor & o = spec.tensors[i];
        o.ne[1] = (int64_t) keep.size();
        o.pieces.clear();
        if (sums && s.channels[it->second]) {
            // a down entry of a width plan: each kept expert's kept channels, gathered here
            auto data = std::make_shared<std::vector<uint8_t>>();
            std::vector<float> v;
            for (size_t k = 0; k < keep.size(); ++k) {
                if (!kept_values(s, it->second, k, v, err)) return false;
                const uint8_t * b = (const uint8_t *) v.data();
                data->insert(data->end(), b, b + v.size() * sizeof(float));
            }
            o.ne[0] = (int64_t) v.size();
            o.memory = std::move(data);
            continue;
        }
        // [ne0, n_expert] F32 (the reader checked): one row of ne0 floats per expert
        const uint64_t row = (uint64_t) t.ne[0] * sizeof(float);
        for (int64_t e : keep) o.pieces.push_back({src.path_of(t), t.file_offset + (uint64_t) e * row, row});
    }
    gguf::write_options wo;
    wo.force = force;
    wo.sync = sync;
    wo.stage = stage;
    wo.stage_sha256 = stage ? stage_sha256 : nullptr;
    std::vector<std::string> written;
    return gguf::write_output(spec, wo, path, written, err);
}

bool write_legacy_slice(const imatrix_slice & s, const std::string & path, bool force, bool sync, std::string & err,
                        std::vector<util::durable_file> * stage, std::vector<std::string> * stage_sha256) {
    const saliency::imatrix_file & f = s.file;
    if (!util::refuse_existing(path, force, err)) return false;
    const int fd = ::open(s.source_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err = "cannot open imatrix '" + s.source_path + "': " + strerror(errno);
        return false;
    }
    struct fd_guard { int fd; ~fd_guard() { ::close(fd); } } guard{fd};
    util::durable_file out;
    if (!out.open(path, err, sync, stage != nullptr)) return false;
    if (!force) out.keep_existing();
    util::sha256_stream hash;   // hashed as written, for SHA256SUMS
    auto put = [&](const void * data, size_t n) {
        hash.update(data, n);
        return out.write(data, n, err);
    };
    std::vector<char> buf(1 << 20);
    // copies n bytes at `off` of the source to the output
    auto copy = [&](uint64_t off, uint64_t n) {
        while (n > 0) {
            const size_t k = (size_t) std::min<uint64_t>(n, buf.size());
            if (!util::pread_full(fd, buf.data(), k, off)) {
                err = "imatrix '" + s.source_path + "': read error at offset " + std::to_string(off);
                return false;
            }
            if (!put(buf.data(), k)) return false;
            off += k;
            n -= k;
        }
        return true;
    };
    auto i32 = [&](int32_t v) { return put(&v, sizeof v); };
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < s.sliced.size(); ++i) index_of[s.sliced[i]] = i;
    if (!i32((int32_t) f.order.size())) return false;
    for (const std::string & name : f.order) {
        const saliency::imatrix_entry & en = f.entries.at(name);
        const auto it = index_of.find(name);
        const uint64_t nval = (uint64_t) en.n_values;
        if (!i32((int32_t) name.size()) || !put(name.data(), name.size()) || !i32((int32_t) en.ncall)) return false;
        if (it == index_of.end()) {
            if (!i32((int32_t) nval) || !copy(en.values_offset, nval * sizeof(float))) return false;
            continue;
        }
        const std::vector<int64_t> & keep = *s.keep[it->second];
        // n_mat slabs of nval / n_mat values (prepare checked nval against the model)
        const uint64_t per = nval / (uint64_t) s.n_mat[it->second];
        if (const auto * channels = s.channels[it->second]) {
            // a down entry of a width plan: each kept expert's kept channels
            const uint64_t K = channels->empty() ? 0 : (uint64_t) channels->front().size();
            if (!i32((int32_t) (K * keep.size()))) return false;
            std::vector<float> v;
            for (size_t k = 0; k < keep.size(); ++k) {
                if (!kept_values(s, it->second, k, v, err) || !put(v.data(), v.size() * sizeof(float))) return false;
            }
            continue;
        }
        const uint64_t slab = per * sizeof(float);
        if (!i32((int32_t) (per * keep.size()))) return false;
        for (int64_t e : keep) {
            if (!copy(en.values_offset + (uint64_t) e * slab, slab)) return false;
        }
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t) st.st_size < f.trailer_offset) {
        err = "imatrix '" + s.source_path + "' changed while being sliced";
        return false;
    }
    if (!copy(f.trailer_offset, (uint64_t) st.st_size - f.trailer_offset)) return false;
    if (!stage) return out.commit(err);
    if (!out.finish(err)) return false;
    stage->push_back(std::move(out));
    if (stage_sha256) stage_sha256->push_back(hash.hex());
    return true;
}

}  // namespace

bool write_imatrix_slice(const imatrix_slice & s, const std::string & path, bool force, bool sync,
                         std::string & err, std::vector<util::durable_file> * stage,
                         std::vector<std::string> * stage_sha256) {
    if (util::same_file(path, s.source_path)) {
        err = "refusing to write the sliced imatrix over its source '" + s.source_path + "'";
        return false;
    }
    return s.file.legacy ? write_legacy_slice(s, path, force, sync, err, stage, stage_sha256)
                         : write_gguf_slice(s, path, force, sync, err, stage, stage_sha256);
}

nlohmann::json coverage_json(const coverage_receipt & c, int64_t threshold) {
    nlohmann::json j;
    j["counts_known"] = c.counts_known;
    j["n_keep"] = c.n_keep;
    j["threshold"] = threshold;
    if (c.counts_known) {
        j["min"] = c.min;
        j["median"] = c.median;
        j["mean"] = c.mean;
        j["max"] = c.max;
    }
    nlohmann::json low = nlohmann::json::array();
    for (const auto & r : c.at_most(threshold)) {
        low.push_back({{"layer", r.layer}, {"index", r.index}, {"source", r.source}, {"count", r.count}});
    }
    j["at_most_threshold"] = low;
    nlohmann::json layers = nlohmann::json::array();
    for (const auto & l : c.layers) {
        nlohmann::json o{{"layer", l.layer}, {"has_entries", l.has_entries}};
        if (l.has_entries && c.counts_known) {
            o["min"] = l.min;
            o["median"] = l.median;
            o["mean"] = l.mean;
            o["max"] = l.max;
        }
        if (l.has_entries) o["counts"] = l.counts;
        layers.push_back(o);
    }
    j["layers"] = layers;
    return j;
}

}  // namespace reap::prune
