#pragma once
// Whether a node's credential (its join token or key) says anything about what the node is: the
// admin service stores terms only when one is set, and the scheduler holds a node to the terms of
// its key before falling back to its last join token's.

#include "tessera/v1/admin.pb.h"

namespace tessera {

// Any field away from its default (proto3 serialises only those): a field added to NodeTerms
// counts without this changing.
inline bool HasNodeTerms(const v1::NodeTerms& terms) { return terms.ByteSizeLong() > 0; }

}  // namespace tessera
