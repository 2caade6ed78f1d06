// The interpolated vector weight gradient on a call's tables: the run that the interpolated vector
// family (interp_vec.cu) and the tensor-core one (mma_interp_wgrad/, for the blocks it leaves) share.
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/interp_tables.cuh"
#include "../plan.cuh"

namespace mmo1d {
namespace cuda {

// With InterpVec's weight-gradient plan, over `tables` (t's points or their blocks' union; at stride 2
// the parity classes'), map giving each of a channel's own points its row there (undefined: the same
// rows): the partial sums of dy * x and of dy, then dw and dtheta (contract(); `all`: the tables hold
// every point the angle's gradient reads) and db (a.db, when not null), every sum in a fixed order. The
// blocks of channels marked in taken (on the device; blocks of the vector kernel's channels), when not
// null, are summed by another kernel: left out of the partial sums and of db, their points' sums read
// from sums (C, t.R).
template <typename scalar_t>
void interp_vec_wgrad(const Plan& plan, const Args<scalar_t>& a, const InterpTables<float>& t,
                      const PointTableView<float>& tables, const at::Tensor& map, bool all, const float* sums = nullptr,
                      const int* taken = nullptr, int taken_block = 1);

}  // namespace cuda
}  // namespace mmo1d
