// Whether the oriented convolution whose forward is computing now records a backward: its autograd
// node's callers say so (KeepTablesForBackward), and the CUDA families then keep the tables that its
// input and weight gradients read again (the interpolated taps': table_cache.cuh's call tables).
// Inline, a flag per library: the CUDA sources compiled on their own into a just-in-time library
// (mmo1d/ops/_ext.py) have a flag of their own that nothing sets; their forwards keep nothing (an
// input gradient's tables still serve the weight gradient after it).
#pragma once

namespace mmo1d {

inline bool& keep_tables_flag() {
  static thread_local bool keep = false;
  return keep;
}

inline bool forward_keeps_tables() {
  return keep_tables_flag();
}

// Sets the flag for the forward computed in its scope, and restores it after.
class KeepTablesForBackward {
 public:
  explicit KeepTablesForBackward(bool keep) : previous_(keep_tables_flag()) { keep_tables_flag() = keep; }
  ~KeepTablesForBackward() { keep_tables_flag() = previous_; }
  KeepTablesForBackward(const KeepTablesForBackward&) = delete;
  KeepTablesForBackward& operator=(const KeepTablesForBackward&) = delete;

 private:
  bool previous_;
};

}  // namespace mmo1d
