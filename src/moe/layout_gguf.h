// Glue between the MoE layout table (moe/layout.h, plain structs) and the GGUF
// reader (gguf/gguf.h): read a model's MoE keys and tensor list and classify it.
// Kept apart from layout.h so that the table itself depends on nothing.
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"

#include <string>
#include <vector>

namespace reap::moe {

// The MoE keys of `arch` (<arch>.expert_count, ...) from `kvs`. Absent keys stay
// unset. A per-layer array (expert_used_count may be one) gives its largest element.
// Fails, naming the key, when a key is present with a type that cannot hold it.
bool read_moe_kv(const reap::gguf::kv_store & kvs, const std::string & arch, moe_kv & out, std::string & err);

// The tensors of `m` as the layout table sees them, in the model's order.
std::vector<tensor_desc> tensor_descs(const reap::gguf::model & m);

// general.architecture, the MoE keys and the tensors of `m`, classified. Roles are
// in the order of m.tensors.
bool layout_of(const reap::gguf::model & m, layout & out, std::string & err, const classify_options & opt = {});

}  // namespace reap::moe
