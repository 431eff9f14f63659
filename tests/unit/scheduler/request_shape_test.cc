#include "scheduler/placement/request_shape.h"

#include <catch2/catch.hpp>

#include "scheduler/placement/gpu_pick.h"

namespace tessera::scheduler {
namespace request_shape_test {

ResourceRequest Request(int gpus, int nodes = 0, std::vector<std::string> names = {}) {
  ResourceRequest request;
  request.gpus = gpus;
  request.nodes = nodes;
  request.node_names = std::move(names);
  return request;
}

Shape ShapeOf(const ResourceRequest& request, int gpus_per_node) {
  Shape shape;
  REQUIRE(ShapeFor(request, gpus_per_node, &shape) == ShapeError::kNone);
  return shape;
}

TEST_CASE("Shape: whole nodes at or above the node size, one node below it", "[placement][shape]") {
  Shape shape = ShapeOf(Request(16), 8);
  CHECK(shape.nodes == 2);
  CHECK(shape.per_node == 8);
  CHECK(shape.whole_nodes);
  shape = ShapeOf(Request(8), 8);
  CHECK(shape.nodes == 1);
  CHECK(shape.whole_nodes);
  shape = ShapeOf(Request(3), 8);
  CHECK(shape.nodes == 1);
  CHECK(shape.per_node == 3);
  CHECK_FALSE(shape.whole_nodes);
  Shape unused;
  CHECK(ShapeFor(Request(12), 8, &unused) == ShapeError::kNotMultipleOfNode);
  CHECK(ShapeFor(Request(4), 0, &unused) == ShapeError::kNoGpusOnNodes);
  CHECK(ShapeFor(Request(-1), 8, &unused) == ShapeError::kNegative);
}

TEST_CASE("Shape: nodes given spreads gpus / nodes over that many nodes", "[placement][shape]") {
  Shape shape = ShapeOf(Request(8, 2), 8);
  CHECK(shape.nodes == 2);
  CHECK(shape.per_node == 4);
  Shape unused;
  CHECK(ShapeFor(Request(12, 5), 8, &unused) == ShapeError::kUneven);
  CHECK(ShapeFor(Request(32, 2), 8, &unused) == ShapeError::kPerNodeTooLarge);
  shape = ShapeOf(Request(8, 0, {"a", "b"}), 8);
  CHECK(shape.nodes == 2);
  CHECK(shape.per_node == 4);
  CHECK(ShapeFor(Request(8, 3, {"a", "b"}), 8, &unused) == ShapeError::kNodesVsNamesMismatch);
}

TEST_CASE("Shape: a CPU-only run holds whole nodes, one unless nodes says more",
          "[placement][shape]") {
  Shape shape = ShapeOf(Request(0), 8);
  CHECK(shape.nodes == 1);
  CHECK(shape.per_node == 8);
  CHECK(shape.whole_nodes);
  shape = ShapeOf(Request(0, 3), 0);
  CHECK(shape.nodes == 3);
  CHECK(shape.per_node == 1);  // the single slot of a CPU-only node
}

TEST_CASE("GPU choice: aligned blocks, best fit among them", "[placement][gpus]") {
  const uint64_t all = 0xFF;
  CHECK(MaskToIndices(PickUnits(all, 8, 4)) == std::vector<int>{0, 1, 2, 3});
  // GPU 0 busy: a 4-GPU run takes the untouched half.
  CHECK(MaskToIndices(PickUnits(all & ~0x01ULL, 8, 4)) == std::vector<int>{4, 5, 6, 7});
  // GPUs 0 and 1 busy: 2 GPUs go to the fullest pair that still fits, 2-3.
  CHECK(MaskToIndices(PickUnits(all & ~0x03ULL, 8, 2)) == std::vector<int>{2, 3});
  // GPU 0 busy: one GPU fills the half-used pair (GPU 1) rather than breaking a free one.
  CHECK(MaskToIndices(PickUnits(all & ~0x01ULL, 8, 1)) == std::vector<int>{1});
  // GPU 2 busy: one GPU takes GPU 3 (its pair is half used), not GPU 0.
  CHECK(MaskToIndices(PickUnits(all & ~0x04ULL, 8, 1)) == std::vector<int>{3});
  // GPU 1 busy: 2 GPUs take 2-3 (their half is already broken), not 4-5.
  CHECK(MaskToIndices(PickUnits(all & ~0x02ULL, 8, 2)) == std::vector<int>{2, 3});
  // GPUs 0 and 4 busy: no aligned 4-block is free, the lowest free GPUs are used.
  CHECK(MaskToIndices(PickUnits(all & ~0x11ULL, 8, 4)) == std::vector<int>{1, 2, 3, 5});
  CHECK(MaskToIndices(PickUnits(all, 8, 8)) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
}

}  // namespace request_shape_test
}  // namespace tessera::scheduler
