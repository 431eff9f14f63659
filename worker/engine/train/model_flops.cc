#include "worker/engine/train/model_flops.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace tessera::engine {

double TrainingFlopsPerToken(const ModelConfig& m, int64_t seq_len) {
  const double d = static_cast<double>(m.d_model);
  const double hidden = static_cast<double>(static_cast<int64_t>(m.mlp_ratio * d));
  // An MoE token passes through its top-k experts and the router: the active parameters.
  const double mlp = m.is_moe() ? static_cast<double>(m.moe_top_k) * 2 * d * hidden +
                                      d * static_cast<double>(m.moe_num_experts)
                                : 2 * d * hidden;
  const double per_layer = 4 * d * d /* qkv + proj */ + mlp;
  const double matrix_params = static_cast<double>(m.n_layers) * per_layer +
                               d * static_cast<double>(m.vocab_size) /* output projection */;
  return 6 * matrix_params +
         12 * static_cast<double>(m.n_layers) * d * static_cast<double>(seq_len);
}

std::optional<double> GpuPeakFlops(const std::string& device_name) {
  const std::string name = absl::AsciiStrToLower(device_name);
  struct Entry {
    const char* match;
    double tflops;
  };
  // Dense tensor-core peaks from the vendors' data sheets (bf16; fp16 for V100 and T4).
  static constexpr Entry kTable[] = {
      {"gb200", 2500}, {"b200", 2250},   {"h200", 989}, {"h100 pcie", 756}, {"h100", 989},
      {"h800", 989},   {"a100", 312},    {"a800", 312}, {"a10g", 125},      {"a10", 125},
      {"l40s", 362},   {"l40", 181},     {"l4", 121},   {"a6000", 155},     {"v100", 125},
      {"t4", 65},      {"mi300x", 1307}, {"mi250", 383}};
  for (const auto& e : kTable) {
    if (absl::StrContains(name, e.match)) return e.tflops * 1e12;
  }
  return std::nullopt;
}

double Mfu(double flops_per_token, double tokens_per_second, double peak_flops_per_rank,
           int world_size) {
  if (peak_flops_per_rank <= 0 || world_size <= 0) return 0;
  return flops_per_token * tokens_per_second / (peak_flops_per_rank * world_size);
}

}  // namespace tessera::engine
