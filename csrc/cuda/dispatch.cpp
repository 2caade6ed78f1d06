// The dispatcher: for a call (a Problem and a pass) the first family of the list in families.cuh
// whose plan succeeds. Every family states its domain in its plan and checks its launch against
// the current device's limits, so a call that no faster family serves goes to the general
// kernels, never to a launch error.
#include <type_traits>

#include "../oriented_dwconv1d.h"
#include "families.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// Whether family F has kernels for scalar_t (only the general families take float64: the others
// accumulate in float32).
template <typename F, typename scalar_t>
constexpr bool takes() {
  return F::kFloat64 || !std::is_same_v<scalar_t, double>;
}

// Whether family F serves the kind of taps of the call: interpolated or rounded.
template <typename F>
bool serves(const Problem& p) {
  return F::kInterp == p.rule.interpolated();
}

template <typename scalar_t, int I, typename F, typename... Rest>
bool plan_from(const Problem& p, Pass pass, Plan* plan) {
  if constexpr (takes<F, scalar_t>()) {
    Plan candidate;
    if (serves<F>(p) && F::template plan<scalar_t>(p, pass, &candidate)) {
      *plan = candidate;
      plan->family = I;
      return true;
    }
  }
  if constexpr (sizeof...(Rest) > 0) {
    return plan_from<scalar_t, I + 1, Rest...>(p, pass, plan);
  } else {
    return false;
  }
}

template <typename scalar_t, int I, typename F, typename... Rest>
void run_from(const Plan& plan, const Args<scalar_t>& a) {
  if (plan.family == I) {
    if constexpr (takes<F, scalar_t>()) {
      F::template run<scalar_t>(plan, a);
      if (a.db != nullptr && !F::kFusedBiasGrad) *a.db = bias_grad(*a.dy);
      return;
    }
  }
  if constexpr (sizeof...(Rest) > 0) {
    run_from<scalar_t, I + 1, Rest...>(plan, a);
  } else {
    TORCH_CHECK(false, "oriented_dwconv1d: no kernel family runs the plan of path '", plan.path, "'");
  }
}

template <typename scalar_t, typename... F>
bool plan_any(const Problem& p, Pass pass, Plan* plan, FamilyList<F...>) {
  return plan_from<scalar_t, 0, F...>(p, pass, plan);
}

template <typename scalar_t, typename... F>
void run_any(const Plan& plan, const Args<scalar_t>& a, FamilyList<F...>) {
  run_from<scalar_t, 0, F...>(plan, a);
}

template <typename... F>
std::vector<std::string> names(FamilyList<F...>) {
  std::vector<std::string> out;
  (out.insert(out.end(), std::begin(F::kPaths), std::end(F::kPaths)), ...);
  return out;
}

}  // namespace

template <typename scalar_t>
Plan plan_call(const Problem& p, Pass pass) {
  Plan plan;
  TORCH_CHECK(plan_any<scalar_t>(p, pass, &plan, Families{}),
              "oriented_dwconv1d: no kernel family serves this call");  // the general families raise first
  return plan;
}

template <typename scalar_t>
void run_call(const Plan& plan, const Args<scalar_t>& a) {
  run_any<scalar_t>(plan, a, Families{});
}

std::vector<std::string> path_names() {
  return names(Families{});
}

#define MMO1D_INSTANTIATE(T)                        \
  template Plan plan_call<T>(const Problem&, Pass); \
  template void run_call<T>(const Plan&, const Args<T>&);
MMO1D_FOR_EACH_DTYPE(MMO1D_INSTANTIATE)
#undef MMO1D_INSTANTIATE

}  // namespace cuda
}  // namespace mmo1d
