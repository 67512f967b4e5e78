// kernellsp harness runtime, format "kernellsp-harness/2".
//
// kernellsp/harness.py inlines this text into every generated harness, AHEAD of the user's file,
// so that macros the user's file defines (N, CHECK, min, ...) cannot reach this code. Everything
// lives in namespace kernellsp_h. The generated part after the user's #include defines the tables
// declared below (kEntry ... kShapes) and the three entry_* functions; main() calls run().
//
// The program writes only under --out DIR (never stdout). See docs/harness.md for the CLI, the
// result.json schema, the PRNG and the poison patterns; kernellsp/harness.py mirrors the PRNG, the
// structured input patterns, the FNV-1a hash and the output digest in Python, so keep both sides in step.

#include <cuda_runtime.h>
#include <cuda_profiler_api.h>
#if KERNELLSP_H_FP16
#include <cuda_fp16.h>
#endif
#if KERNELLSP_H_BF16
#include <cuda_bf16.h>
#endif

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#ifndef KERNELLSP_H_INTERFACE_ONLY  // the heavy C++ headers only where the runtime is compiled (split build)
#include <cuda.h>  // driver API types of the guard-page allocator (its entry points are fetched at run time: no -lcuda)
#include <cxxabi.h>  // the cubin entry's name, demangled
#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#endif

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define KERNELLSP_H_HD __host__ __device__

namespace kernellsp_h {

typedef unsigned long long u64;
typedef long long i64;

// ------------------------------------------------------------------------------------------------
// Tables (defined by the generated part)

enum : int { DT_F16 = 0, DT_BF16, DT_F32, DT_F64, DT_I8, DT_U8, DT_I16, DT_U16, DT_I32, DT_U32, DT_I64, DT_U64 };
enum : int { DIR_IN = 0, DIR_OUT = 1, DIR_INOUT = 2, DIR_SCALAR = 3 };
enum : int { DIST_DEFAULT = 0, DIST_UNIFORM, DIST_NORMAL, DIST_RANDINT, DIST_ONES, DIST_ARANGE, DIST_CHOICE };
enum : int { SC_INT = 1, SC_UINT = 2, SC_FLOAT = 3, SC_BOOL = 4 };

static const char* const kDtypeNames[] = {"f16", "bf16", "f32", "f64", "i8",  "u8",
                                          "i16", "u16",  "i32", "u32", "i64", "u64"};
static const int kDtypeBytes[] = {2, 2, 4, 8, 1, 1, 2, 2, 4, 4, 8, 8};
static const char* const kDirNames[] = {"in", "out", "inout", "scalar"};

struct ArgInfo {
  const char* name;
  const char* ctype;    // the parameter's type as written
  int dir;              // DIR_*
  int dtype;            // DT_* (buffers; -1 for scalars)
  const char* file;     // output file name (out/inout), else nullptr
  const char* in_file;  // input dump file name (in/inout), else nullptr
};

struct Scalar {
  int kind;  // SC_*
  i64 i;
  u64 u;
  double f;
};

struct Dist {
  int kind;  // DIST_*
  int n;     // number of parameters (f and i hold the same values as double and as integer)
  const double* f;
  const i64* i;
};

struct ShapeInfo {
  const char* sizes_json;
  const char* scalars_json;
  unsigned grid[3];
  unsigned block[3];
  u64 smem;
  const u64* counts;      // per argument (0 for scalars)
  const Scalar* scalars;  // per argument (unused for buffers)
  const Dist* dists;      // per argument (unused for scalars and outputs)
};

extern const char* const kEntry;
extern const char* const kEntryKind;  // "global" or "host"
extern const char* const kSourcePath;
extern const int kNumArgs;
extern const ArgInfo kArgs[];
extern const int kNumShapes;
extern const ShapeInfo kShapes[];

// Defined by the generated part, after the user's file.
cudaError_t entry_prepare(int shape);                  // per-launch setup (dynamic smem attribute)
bool entry_attributes(cudaFuncAttributes* attr);       // false for host launchers
void entry_launch(int shape, void* const* ptrs);       // one call of the entry

// Defined by the runtime below: ends the run as a launch_error (a host launcher returned an error).
[[noreturn]] void launcher_failed(const char* name, cudaError_t e);

// The device-only build (docs/harness.md, "Device-only builds"): the entry's unit holds no user code and
// the entry is the one function called kEntry in the cubin given with --cubin, launched through the driver
// API. ``sizes`` are the host-side sizes of the arguments, checked against the function's parameters.
cudaError_t cubin_prepare(int shape);
bool cubin_attributes(cudaFuncAttributes* attr);
void cubin_launch(int shape, void** args, const std::size_t* sizes, int nargs);

// A host launcher that returns cudaError_t reports its own failures (a bad argument it validated, a
// failed cudaMalloc of its scratch space): a non-success return is a launch error, not an "ok" run.
template <class F>
inline void call_launcher(F&& call, const char* name) {
  if constexpr (std::is_same_v<decltype(call()), cudaError_t>) {
    cudaError_t e = call();
    if (e != cudaSuccess) launcher_failed(name, e);
  } else {
    (void)call();
  }
}

// ------------------------------------------------------------------------------------------------
// Scalar conversion (used by the generated call)

inline double scalar_as_double(const Scalar& s) {
  switch (s.kind) {
    case SC_FLOAT: return s.f;
    case SC_UINT: return (double)s.u;
    default: return (double)s.i;
  }
}
inline i64 scalar_as_i64(const Scalar& s) {
  switch (s.kind) {
    case SC_FLOAT: return (i64)s.f;
    case SC_UINT: return (i64)s.u;
    default: return s.i;
  }
}
inline u64 scalar_as_u64(const Scalar& s) {
  switch (s.kind) {
    case SC_FLOAT: return (u64)s.f;
    case SC_UINT: return s.u;
    default: return (u64)s.i;
  }
}

template <class T>
struct ScalarConv {
  static constexpr bool ok = std::is_arithmetic<T>::value || std::is_enum<T>::value;
  static T conv(const Scalar& s) {
    if constexpr (std::is_same<T, bool>::value) {
      return scalar_as_double(s) != 0.0;
    } else if constexpr (std::is_floating_point<T>::value) {
      return (T)scalar_as_double(s);
    } else if constexpr (std::is_enum<T>::value) {
      return (T)scalar_as_i64(s);
    } else if constexpr (std::is_integral<T>::value && std::is_signed<T>::value) {
      return (T)scalar_as_i64(s);
    } else if constexpr (std::is_integral<T>::value) {
      return (T)scalar_as_u64(s);
    } else {
      static_assert(ok, "kernellsp harness: a scalar parameter has a type that cannot be set from a number");
      return T();
    }
  }
};
#if KERNELLSP_H_FP16
template <>
struct ScalarConv<__half> {
  static constexpr bool ok = true;
  static __half conv(const Scalar& s) { return __float2half_rn((float)scalar_as_double(s)); }
};
#endif
#if KERNELLSP_H_BF16
template <>
struct ScalarConv<__nv_bfloat16> {
  static constexpr bool ok = true;
  static __nv_bfloat16 conv(const Scalar& s) { return __float2bfloat16_rn((float)scalar_as_double(s)); }
};
#endif

// What the generated call uses (it sits after the user's file, so it names only kernellsp_* things).
template <class T>
constexpr bool scalar_ok_v = ScalarConv<T>::ok;
template <class T>
inline T scalar_arg(int shape, int arg) {
  return ScalarConv<T>::conv(kShapes[shape].scalars[arg]);
}
inline dim3 launch_grid(int shape) {
  const ShapeInfo& s = kShapes[shape];
  return dim3(s.grid[0], s.grid[1], s.grid[2]);
}
inline dim3 launch_block(int shape) {
  const ShapeInfo& s = kShapes[shape];
  return dim3(s.block[0], s.block[1], s.block[2]);
}
inline std::size_t launch_smem(int shape) { return (std::size_t)kShapes[shape].smem; }

// sizeof the pointee of a pointer parameter type; 1 for void.
template <class P>
constexpr std::size_t pointee_size() {
  typedef typename std::remove_cv<typename std::remove_pointer<P>::type>::type T;
  if constexpr (std::is_void<T>::value) {
    return 1;
  } else {
    return sizeof(T);
  }
}

// ------------------------------------------------------------------------------------------------
// Everything above is the interface the generated glue uses; everything below is the runtime proper.
// The split build (kernellsp/run/harness_build.py) compiles the runtime once per toolchain as its own
// unit and gives the entry's unit only the interface (KERNELLSP_H_INTERFACE_ONLY): whatever the glue
// calls must be declared above this line.
#ifndef KERNELLSP_H_INTERFACE_ONLY

// ------------------------------------------------------------------------------------------------
// PRNG: splitmix64 used as a counter-based generator (mirrored in kernellsp/harness.py)

constexpr u64 kGamma = 0x9E3779B97F4A7C15ULL;
constexpr u64 kArgMul = 0xD1B54A32D192ED03ULL;
constexpr u64 kRepMul = 0xA0761D6478BD642FULL;
constexpr double kTwoPi = 6.283185307179586;
constexpr double kSqrt3 = 1.7320508075688772;

KERNELLSP_H_HD inline u64 mix64(u64 z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// Key of the stream for argument `arg` (0-based position in the signature) under `seed`.
KERNELLSP_H_HD inline u64 stream_key(u64 seed, int arg) {
  return mix64(mix64(seed + kGamma) + (u64)(arg + 1) * kArgMul);
}
// The counter-th 64-bit draw of a stream. Element j uses draws 2j (and 2j+1 for normal).
KERNELLSP_H_HD inline u64 draw(u64 key, u64 counter) { return mix64(key + (counter + 1ULL) * kGamma); }
// Seed of the fresh inputs of timing launch `launch` (warm-ups first), --fresh-inputs only.
inline u64 launch_seed(u64 seed, u64 launch) { return mix64(seed ^ ((launch + 1ULL) * kRepMul)); }

KERNELLSP_H_HD inline u64 bounded(u64 x, u64 range) {  // floor(x * range / 2^64)
#ifdef __CUDA_ARCH__
  return __umul64hi(x, range);
#else
  return (u64)(((unsigned __int128)x * (unsigned __int128)range) >> 64);
#endif
}
KERNELLSP_H_HD inline double unit53(u64 x) { return (double)(x >> 11) * 0x1.0p-53; }  // [0, 1)
KERNELLSP_H_HD inline double mul_rn(double a, double b) {  // a product that is never fused into an FMA
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  volatile double p = a * b;
  return p;
#endif
}
KERNELLSP_H_HD inline double round_half_away(double v) {
  double f = floor(v);
  double d = v - f;
  if (d > 0.5) return f + 1.0;
  if (d < 0.5) return f;
  return v >= 0.0 ? f + 1.0 : f;
}
template <class T>
KERNELLSP_H_HD inline T clamp_from_double(double v, double lo, double hi, T tlo, T thi) {
  if (v != v) return (T)0;
  if (v <= lo) return tlo;
  if (v >= hi) return thi;
  return (T)v;
}

KERNELLSP_H_HD inline void store_elem(void* base, u64 j, int dtype, bool int_path, double fv, i64 iv);

// Writes element j of a buffer of `dtype` drawn from `d` with stream key `key`.
KERNELLSP_H_HD inline void fill_one(void* base, u64 j, int dtype, const Dist& d, u64 key) {
  const bool is_float = dtype <= DT_F64;
  double fv = 0.0;
  i64 iv = 0;
  bool int_path = false;  // integer dtypes: value in iv (wraps), else fv (floored/rounded, clamped)
  switch (d.kind) {
    case DIST_UNIFORM: {
      double lo = d.f[0], hi = d.f[1];
      fv = lo + mul_rn(hi - lo, unit53(draw(key, 2 * j)));
      if (!is_float) fv = floor(fv);
      break;
    }
    case DIST_NORMAL: {
      double u1 = (double)((draw(key, 2 * j) >> 11) + 1ULL) * 0x1.0p-53;  // (0, 1]
      double u2 = unit53(draw(key, 2 * j + 1));
      double z = sqrt(-2.0 * log(u1)) * cos(kTwoPi * u2);
      fv = d.f[0] + mul_rn(d.f[1], z);
      if (!is_float) fv = round_half_away(fv);
      break;
    }
    case DIST_RANDINT: {
      u64 range = (u64)d.i[1] - (u64)d.i[0];
      iv = (i64)((u64)d.i[0] + bounded(draw(key, 2 * j), range));
      fv = (double)iv;
      int_path = true;
      break;
    }
    case DIST_ONES:
      iv = 1;
      fv = 1.0;
      int_path = true;
      break;
    case DIST_ARANGE: {
      if (is_float) {
        fv = d.f[0] + mul_rn((double)j, d.f[1]);
      } else {
        iv = (i64)((u64)d.i[0] + j * (u64)d.i[1]);
        int_path = true;
      }
      break;
    }
    case DIST_CHOICE: {
      u64 k = bounded(draw(key, 2 * j), (u64)d.n);
      fv = d.f[k];
      iv = d.i[k];
      int_path = true;
      break;
    }
    default: {  // floats: uniform(-1, 1); integers: randint(0, 100)
      if (is_float) {
        fv = -1.0 + mul_rn(2.0, unit53(draw(key, 2 * j)));
      } else {
        iv = (i64)bounded(draw(key, 2 * j), 100ULL);
        int_path = true;
      }
      break;
    }
  }
  store_elem(base, j, dtype, int_path, fv, iv);
}

// Writes element j of a buffer of `dtype`: an integer dtype takes `iv` (wrapping) when `int_path`, else
// `fv` floored/rounded by the caller and clamped; a float dtype always takes `fv`.
KERNELLSP_H_HD inline void store_elem(void* base, u64 j, int dtype, bool int_path, double fv, i64 iv) {
  switch (dtype) {
#if KERNELLSP_H_FP16
    case DT_F16: ((__half*)base)[j] = __float2half_rn((float)fv); break;
#endif
#if KERNELLSP_H_BF16
    case DT_BF16: ((__nv_bfloat16*)base)[j] = __float2bfloat16_rn((float)fv); break;
#endif
    case DT_F32: ((float*)base)[j] = (float)fv; break;
    case DT_F64: ((double*)base)[j] = fv; break;
    case DT_I8:
      ((int8_t*)base)[j] = int_path ? (int8_t)(uint8_t)(u64)iv
                                    : clamp_from_double<int8_t>(fv, -128.0, 127.0, INT8_MIN, INT8_MAX);
      break;
    case DT_U8:
      ((uint8_t*)base)[j] = int_path ? (uint8_t)(u64)iv : clamp_from_double<uint8_t>(fv, 0.0, 255.0, 0, UINT8_MAX);
      break;
    case DT_I16:
      ((int16_t*)base)[j] = int_path ? (int16_t)(uint16_t)(u64)iv
                                     : clamp_from_double<int16_t>(fv, -32768.0, 32767.0, INT16_MIN, INT16_MAX);
      break;
    case DT_U16:
      ((uint16_t*)base)[j] = int_path ? (uint16_t)(u64)iv
                                      : clamp_from_double<uint16_t>(fv, 0.0, 65535.0, 0, UINT16_MAX);
      break;
    case DT_I32:
      ((int32_t*)base)[j] = int_path ? (int32_t)(uint32_t)(u64)iv
                                     : clamp_from_double<int32_t>(fv, -2147483648.0, 2147483647.0, INT32_MIN,
                                                                  INT32_MAX);
      break;
    case DT_U32:
      ((uint32_t*)base)[j] = int_path ? (uint32_t)(u64)iv
                                      : clamp_from_double<uint32_t>(fv, 0.0, 4294967295.0, 0, UINT32_MAX);
      break;
    case DT_I64:
      ((int64_t*)base)[j] = int_path ? (int64_t)iv
                                     : clamp_from_double<int64_t>(fv, -0x1.0p63, 0x1.0p63, INT64_MIN, INT64_MAX);
      break;
    case DT_U64:
      ((uint64_t*)base)[j] = int_path ? (uint64_t)iv : clamp_from_double<uint64_t>(fv, 0.0, 0x1.0p64, 0, UINT64_MAX);
      break;
    default: break;
  }
}

// ------------------------------------------------------------------------------------------------
// Structured input patterns (check mode, --sets SEED:PATTERN; mirrored in kernellsp/harness.py)
//
// Random inputs from the spec's distribution let a kernel that reads half its input and doubles the
// result hide inside a loose tolerance (the sample mean is close to the mean). Beside them, the
// correctness gate runs inputs whose answer depends on elements a sub-sampling kernel skips: sparse
// spikes at random positions (a random subset misses some), pairs of opposite sign (every other element
// is a different population), spikes ever denser along the buffer (its second half holds three times
// the first half's) and spikes whose magnitudes span many binades (precision downgrades and flushed
// small values show). Every value stays inside the range of the spec's own distribution, so the
// kernel's preconditions hold. The patterns are sparse (the other elements sit at zero, or the range's
// bound nearest zero) and one sign dominates: sums stay small and well conditioned, so even a naive
// float32 accumulation (one atomicAdd per element) stays as accurate as on the spec's inputs and an
// honest re-association within tolerance. Distributions that are not ranges (ones, arange, choice)
// keep the spec's values.
//
// "tail" applies to normal distributions only (their support is the whole line): sparse spikes of
// either sign far out in the tails, 4 to 256 standard deviations from the mean. A value that far out
// is a legal input of the spec, just rare; it exposes shortcuts that random inputs never reach, such as
// a softmax taking its stabilising max over part of the row (exp overflows to inf). Other
// distributions keep the spec's values under it.
//
// "offset" applies to f32/f64 normal distributions only: the whole buffer sits 128 to 256 standard
// deviations to one side of the mean, every element a uniform draw of one standard deviation around
// that shifted centre. Still legal inputs (a normal's support is the whole line), and the data real
// code sees (activations with a large mean, sensor readings, timestamps). It exposes catastrophic
// cancellation that zero-mean inputs hide: a variance taken as E[x^2] - E[x]^2 in fp32 loses
// up to log2(256^2) = 16 of its 24 bits, while an honest two-pass or Welford rewrite loses about
// log2(256) = 8 in its mean, so an honest re-association stays within the error budget and the
// shortcut does not. f16/bf16 inputs are left alone: that far out their noise keeps 1 to 4 bits.

enum : int { PREFILL_POISON = 0, PREFILL_PREVIOUS, PREFILL_GARBAGE, PREFILL_COVERAGE };
static const char* const kPrefillNames[] = {"poison", "previous", "garbage", "coverage"};
enum : int { PAT_SPEC = 0, PAT_SPIKES, PAT_ALTERNATING, PAT_RAMP, PAT_WIDE, PAT_TAIL, PAT_OFFSET };
constexpr int kNumPatterns = 7;
static const char* const kPatternNames[kNumPatterns] = {"spec",  "spikes", "alternating", "ramp",
                                                        "wide",  "tail",   "offset"};
static const double kFloatMax[4] = {65504.0, 0x1.fe00000000000p+127, 0x1.fffffe0000000p+127, 0x1.fffffffffffffp+1023};
static const int kWideBinades[4] = {10, 24, 24, 48};  // at most; f16 keeps its values above its smallest normal

// Whether `pat` changes a buffer of `dtype` drawn from `d`; `integral`: the values are integers
// (randint, and the integer default randint(0, 100)), drawn in [*ilo, *ilo + *irange).
inline bool pattern_applies(int dtype, const Dist& d, bool* integral, i64* ilo, u64* irange, int pat) {
  const bool is_float = dtype <= DT_F64;
  *integral = false;
  if (pat == PAT_TAIL) return is_float && d.kind == DIST_NORMAL;
  if (pat == PAT_OFFSET) return (dtype == DT_F32 || dtype == DT_F64) && d.kind == DIST_NORMAL;
  if (d.kind == DIST_RANDINT) {
    *integral = true;
    *ilo = d.i[0];
    *irange = (u64)d.i[1] - (u64)d.i[0];
    return true;
  }
  if (d.kind == DIST_DEFAULT && !is_float) {
    *integral = true;
    *ilo = 0;
    *irange = 100;
    return true;
  }
  return is_float && (d.kind == DIST_DEFAULT || d.kind == DIST_UNIFORM || d.kind == DIST_NORMAL);
}

// The range [lo, hi] of a float distribution the patterns draw from (normal: mean +- 3 std, inside the dtype).
inline void pattern_float_range(int dtype, const Dist& d, double* lo, double* hi) {
  if (d.kind == DIST_UNIFORM) {
    *lo = d.f[0];
    *hi = d.f[1];
  } else if (d.kind == DIST_NORMAL) {
    const double w = mul_rn(3.0, d.f[1]);
    const double m = kFloatMax[dtype];
    *lo = d.f[0] - w < -m ? -m : d.f[0] - w;
    *hi = d.f[0] + w > m ? m : d.f[0] + w;
  } else {
    *lo = -1.0;
    *hi = 1.0;
  }
}

// Element j (of `count`) of a float pattern in [lo, hi]. Products go through mul_rn so that the
// Python mirror computes the same doubles.
inline double pattern_float(int pat, u64 j, u64 count, int dtype, double lo, double hi, u64 key) {
  const u64 x1 = draw(key, 2 * j), x2 = draw(key, 2 * j + 1);
  const double u = unit53(x1);
  const double c = lo > 0.0 ? lo : (hi < 0.0 ? hi : 0.0);  // zero where the range holds it
  const double up = hi - c, dn = c - lo;
  const double s = up >= dn ? 1.0 : -1.0;  // the dominant side
  const double big = up >= dn ? up : dn, small = up >= dn ? dn : up;
  const double spike = c + s * mul_rn(big, 0.5 + mul_rn(0.5, u));  // the dominant side, [0.5, 1] of its room
  double v = c;
  if (pat == PAT_TAIL) {  // 1 in 64, mean +- std * 2^(2+k) * (1 + u), k in 0..5, inside the dtype only
    if (bounded(x2, 64) != 0) return c;
    const double mean = mul_rn(0.5, lo + hi), sd = (hi - lo) / 6.0;
    const double far = mul_rn(sd, ldexp(1.0 + u, 2 + (int)bounded(x2 << 8, 6)));  // bits below the 1-in-64 test
    const double t = (x2 & 1) ? mean + far : mean - far;
    const double m = kFloatMax[dtype];
    return t < -m ? -m : (t > m ? m : t);
  }
  if (pat == PAT_OFFSET) {  // centre mean +- std * 128 * (1 + u0) for the whole buffer, +- std * sqrt(3) noise
    const u64 x0 = draw(key, ~0ULL);
    const double mean = mul_rn(0.5, lo + hi), sd = (hi - lo) / 6.0;
    const double shift = mul_rn(sd, ldexp(1.0 + unit53(x0), 7));
    const double centre = (x0 & 1) ? mean + shift : mean - shift;
    return centre + mul_rn(sd, mul_rn(mul_rn(2.0, u) - 1.0, kSqrt3));
  }
  if (pat == PAT_SPIKES) {  // 1 element in 64, at random
    if (bounded(x2, 64) == 0) v = spike;
  } else if (pat == PAT_ALTERNATING) {  // 1 pair in 32: (+large, -small), the pair decided by its even element
    if (bounded(draw(key, 2 * (j & ~1ULL) + 1), 32) == 0) {
      v = (j & 1) == 0 ? spike : c - s * mul_rn(small, 0.25 + mul_rn(0.25, u));
    }
  } else if (pat == PAT_RAMP) {  // spikes with a probability growing from 0 to 1/16 along the buffer
    if (unit53(x2) < ((double)j + 0.5) / (double)count * 0.0625) v = spike;
  } else if (bounded(x2, 64) == 0) {  // PAT_WIDE: 1 in 64, magnitude 2^-e with P(e = k) = 2^-(k+1)
    const int e = __builtin_ctzll(x2 | (1ULL << kWideBinades[dtype]));
    const double mag = ldexp(0.5 + mul_rn(0.5, u), -e);
    v = small > 0.0 && ((x2 >> 48) & 7) == 0 ? c - s * mul_rn(small, mag) : c + s * mul_rn(big, mag);
  }
  return v < lo ? lo : (v > hi ? hi : v);
}

// Element j of an integer pattern: an offset in [0, range) from the distribution's lower bound.
inline u64 pattern_int_offset(int pat, u64 j, u64 range, u64 key) {
  const u64 x1 = draw(key, 2 * j), x2 = draw(key, 2 * j + 1);
  if (pat == PAT_SPIKES) return bounded(x2, 64) == 0 ? bounded(x1, range) : 0;
  if (pat == PAT_ALTERNATING) {
    const u64 q = range / 4 > 0 ? range / 4 : 1;
    return (j & 1) == 0 ? range - 1 - bounded(x1, q) : bounded(x1, q);
  }
  if (pat == PAT_RAMP) return j % range;
  int bits = 0;  // PAT_WIDE: floor(log2(range)); offsets below range >> e for a random e
  while (bits < 63 && (range >> (bits + 1)) > 0) ++bits;
  const u64 r = range >> bounded(x1, (u64)bits + 1);
  return bounded(x2, r > 0 ? r : 1);
}

// Writes element j of an input buffer under pattern `pat` (PAT_SPEC: the spec's distribution).
inline void fill_pattern_one(void* base, u64 j, u64 count, int dtype, const Dist& d, u64 key, int pat) {
  bool integral = false;
  i64 ilo = 0;
  u64 irange = 0;
  if (pat == PAT_SPEC || !pattern_applies(dtype, d, &integral, &ilo, &irange, pat)) {
    fill_one(base, j, dtype, d, key);
    return;
  }
  if (integral) {
    const i64 iv = (i64)((u64)ilo + pattern_int_offset(pat, j, irange, key));
    store_elem(base, j, dtype, true, (double)iv, iv);
    return;
  }
  double lo = 0.0, hi = 0.0;
  pattern_float_range(dtype, d, &lo, &hi);
  store_elem(base, j, dtype, false, pattern_float(pat, j, count, dtype, lo, hi, key), 0);
}

// Clears the sign bit of every element of a float buffer (the "+abs" modifier of a set: |x|).
KERNELLSP_H_HD inline void abs_elem(unsigned char* base, u64 j, int esize) { base[j * esize + esize - 1] &= 0x7F; }

// ------------------------------------------------------------------------------------------------
// Hashes (mirrored in kernellsp/harness.py)

inline u64 fnv1a64(const unsigned char* p, std::size_t n) {
  u64 h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

KERNELLSP_H_HD inline u64 load_elem(const unsigned char* p, u64 j, int esize) {
  switch (esize) {
    case 1: return p[j];
    case 2: return ((const uint16_t*)p)[j];
    case 4: return ((const uint32_t*)p)[j];
    default: return ((const uint64_t*)p)[j];
  }
}
KERNELLSP_H_HD inline u64 poison_pattern(unsigned char byte, int esize) {
  u64 v = 0;
  for (int k = 0; k < esize; ++k) v = (v << 8) | byte;
  return v;
}

// Calls f(lo, hi) on disjoint chunks covering [0, n), on up to 16 threads when n is large: the host input
// fill (a counter-based generator, so any chunk can be filled on its own) and the output digests dominated
// a verification's harness processes on big shapes (0.5 s per input set of 32M elements on one core).
template <class F>
inline void parallel_chunks(u64 n, F f) {
  const u64 min_chunk = 1u << 20;
  u64 threads = std::thread::hardware_concurrency();
  threads = std::min<u64>(std::min<u64>(threads ? threads : 1, 16), (n + min_chunk - 1) / min_chunk);
  if (threads <= 1) {
    f((u64)0, n);
    return;
  }
  std::vector<std::thread> pool;
  const u64 step = (n + threads - 1) / threads;
  try {
    for (u64 lo = step; lo < n; lo += step) pool.emplace_back(f, lo, std::min(n, lo + step));
  } catch (const std::system_error&) {
    // No more threads (a process limit): the rest is filled on this one.
    const u64 done = step * (pool.size() + 1);
    if (done < n) f(done, n);
  }
  f((u64)0, std::min(n, step));
  for (std::thread& th : pool) th.join();
}

// Order-independent digest of a buffer: sum over elements j of mix64(bits_j + (j + 1) * kGamma),
// mod 2^64. `poisoned` counts elements whose bits still equal the poison pattern. A sum, so it is taken in
// chunks on several threads (a 256 MB output took a tenth of a second per input set on one core).
inline void digest_host(const unsigned char* p, u64 count, int esize, unsigned char poison, u64* digest,
                        u64* poisoned) {
  const u64 pat = poison_pattern(poison, esize);
  std::atomic<u64> s{0}, c{0};
  parallel_chunks(count, [&](u64 lo, u64 hi) {
    u64 ps = 0, pc = 0;
    for (u64 j = lo; j < hi; ++j) {
      u64 v = load_elem(p, j, esize);
      ps += mix64(v + (j + 1ULL) * kGamma);
      pc += (v == pat) ? 1ULL : 0ULL;
    }
    s.fetch_add(ps);
    c.fetch_add(pc);
  });
  *digest = s.load();
  *poisoned = c.load();
}

__global__ void kernellsp_h_digest_kernel(const unsigned char* p, u64 count, int esize, unsigned char poison,
                                          u64* acc) {
  const u64 pat = poison_pattern(poison, esize);
  u64 s = 0, c = 0;
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += (u64)gridDim.x * blockDim.x) {
    u64 v = load_elem(p, j, esize);
    s += mix64(v + (j + 1ULL) * kGamma);
    c += (v == pat) ? 1ULL : 0ULL;
  }
  for (int off = 16; off > 0; off >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, off);
    c += __shfl_down_sync(0xffffffffu, c, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&acc[0], s);
    atomicAdd(&acc[1], c);
  }
}

__global__ void kernellsp_h_fill_kernel(void* base, u64 count, int dtype, Dist d, u64 key) {
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += (u64)gridDim.x * blockDim.x) {
    fill_one(base, j, dtype, d, key);
  }
}

__global__ void kernellsp_h_abs_kernel(unsigned char* base, u64 count, int esize) {
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += (u64)gridDim.x * blockDim.x) {
    abs_elem(base, j, esize);
  }
}

// Writes `pattern` over all `words` 32-bit words of this block's dynamic shared memory (the harness
// launches it with the largest dynamic shared memory a block may have, so one block fills an SM's whole
// shared memory) and marks the SM it ran on in `seen` (a 2048-bit map) when `seen` is not null.
__global__ void kernellsp_h_smem_poison_kernel(unsigned pattern, unsigned words, unsigned* seen) {
  extern __shared__ unsigned kernellsp_h_smem[];
  volatile unsigned* s = kernellsp_h_smem;  // volatile: stores nobody reads are not dead code here
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) s[i] = pattern;
  if (seen != nullptr && threadIdx.x == 0) {
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    atomicOr(&seen[(smid >> 5) & 63u], 1u << (smid & 31u));
  }
}

// ------------------------------------------------------------------------------------------------
// State and result.json

struct Options {
  std::string mode;
  std::string out;
  long shape = 0;
  u64 seed = 0;
  long reps = 50;
  long warmup = 5;
  bool poison_alt = false;
  bool dump_inputs = false;
  bool fresh_inputs = false;
  bool dump_last = false;
  long device = 0;
  std::string sets;          // --sets: the input sets of check/inputs mode (empty: one set, --seed)
  long check_launches = 0;   // --check-launches M: keep the outputs of M timed launches chosen at random
  bool alloc_plain = false;  // --alloc plain: cudaMalloc, no guard pages (for compute-sanitizer)
  std::string cubin;         // --cubin FILE: the entry's device code (device-only build)
};

// One input set of check mode: SEED[:PATTERN][@LAUNCH][+abs] (docs/harness.md).
struct SetSpec {
  std::string text;
  u64 seed = 0;
  int pattern = PAT_SPEC;
  bool has_launch = false;  // the device fill of time-mode launch LAUNCH under --fresh-inputs
  u64 launch = 0;
  bool abs = false;  // |x| of every float input
  // What the outputs hold when the entry starts: the poison pattern (PREFILL_POISON); what the previous set's
  // launch left there, i.e. the results of an earlier call on other inputs (PREFILL_PREVIOUS, "~previous");
  // those results cyclically shifted by a seed-derived offset: finite values of the output's own range in
  // the wrong places (PREFILL_GARBAGE, "~garbage"). A kernel that keys its work on an output's prior
  // contents ("already computed", "no partial yet" = the poison) is right on a poisoned output and wrong
  // in the second call of an application; these sets show it. PREFILL_COVERAGE ("~coverage") poisons the
  // inout buffers too (not their inputs): elements still holding the poison after the launch were never
  // written, which is how the gate tells which sizes a kernel with inout outputs handles at all.
  int prefill = 0;
};

// What one set did to one buffer (parallel to State::bufs).
struct SetBuf {
  std::string file, input_file;
  bool has_digest = false, has_mutated = false, mutated = false, has_hash_before = false;
  u64 digest = 0, unwritten = 0, hash_before = 0;
};

struct SetResult {
  SetSpec spec;
  std::vector<SetBuf> bufs;
  double launch_s = -1.0;  // host wall seconds of this set's launch and sync (-1: not launched)
};

// The outputs of one timed launch, chosen at random after it ran (--check-launches).
struct Snapshot {
  long launch = -1;  // index among all launches of the run, warm-ups first
  std::vector<std::vector<unsigned char>> data;  // per buffer (out/inout only), on the host
  std::vector<void*> dev;  // per buffer (out/inout only), on the device when it had room (else null)
  std::vector<std::size_t> bytes;  // per buffer (out/inout only)
};

struct Buffer {
  int arg = 0;
  u64 count = 0;
  std::size_t bytes = 0;
  int esize = 0;
  unsigned char poison = 0;
  void* dev = nullptr;
  std::vector<unsigned char> init;  // host copy of the input contents (in / inout)
  bool has_hash_before = false, has_hash_after = false, has_digest = false;
  u64 hash_before = 0, hash_after = 0, digest = 0, unwritten = 0;
  bool wrote_file = false, wrote_input = false;
  std::vector<u64> rep_digests, rep_unwritten;
  Dist dev_dist = {0, 0, nullptr, nullptr};  // parameters copied to the device (--fresh-inputs)
  // Guard pages: the buffer ends where an unmapped page begins. The mapped bytes below it and the
  // rounding above its end (to 16 bytes) hold a canary; `guard_damage` counts canary bytes found changed.
  bool guarded = false;
  unsigned char* slack_lo = nullptr;
  std::size_t slack_lo_bytes = 0;
  unsigned char* slack_hi = nullptr;
  std::size_t slack_hi_bytes = 0;
  u64 guard_damage = 0;
};

struct State {
  Options opt;
  bool opt_out_known = false;
  bool shape_known = false;
  std::string status = "ok";
  std::string error;
  bool has_error = false;
  std::string device_json = "null";
  std::string attrs_json = "null";
  std::vector<Buffer> bufs;
  std::vector<double> timings, timings_sync;
  u64 l2_flush_bytes = 0;
  bool persisting_set = false;
  std::string persisting_error;
  bool has_persisting_error = false;
  u64 pad_bytes = 0;
  bool gpu_used = false;
  int sm_count = 1;
  std::vector<SetSpec> sets;
  std::vector<SetResult> set_results;
  std::vector<Snapshot> snapshots;
  std::string alloc_kind = "none";  // guard | plain | none (no GPU reached)
  std::string alloc_error;          // why guard pages were not used (empty when they were, or not asked for)
  u64 alloc_granularity = 0;
  bool smem_poisoned = false;
  u64 smem_poison_bytes = 0;
  long smem_sms_covered = -1;
  std::string smem_error;
  u64 smem_match_bytes = 0;  // per block of the second poison launch, shaped like the entry (0: none)
  bool entry_is_kernel = false;
  u64 entry_static_smem = 0;
  double copy_bw = 0.0;  // bytes/s of a device-to-device copy (time mode), 0 when not measured
  // Host wall seconds per step of this process (evidence of where a verification's time goes; never a verdict).
  std::vector<std::pair<std::string, double>> host_seconds;
};

static State g_state;

// Adds the wall time of its scope to g_state.host_seconds[name].
struct HostPhase {
  const char* name;
  std::chrono::steady_clock::time_point t0;
  explicit HostPhase(const char* n) : name(n), t0(std::chrono::steady_clock::now()) {}
  ~HostPhase() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& kv : g_state.host_seconds)
      if (kv.first == name) {
        kv.second += s;
        return;
      }
    g_state.host_seconds.emplace_back(name, s);
  }
};

inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", (unsigned)c);
          o += b;
        } else {
          o += (char)c;
        }
    }
  }
  return o + "\"";
}
inline std::string json_u64(u64 v) { return std::to_string(v); }
inline std::string json_hex(u64 v) {
  char b[32];
  std::snprintf(b, sizeof b, "\"0x%016llx\"", v);
  return b;
}
inline std::string json_double(double v) {
  if (!std::isfinite(v)) return "null";
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
template <class T, class F>
inline std::string json_list(const std::vector<T>& v, F f) {
  std::string o = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) o += ", ";
    o += f(v[i]);
  }
  return o + "]";
}

inline std::string path_in_out(const char* name) { return g_state.opt.out + "/" + name; }

inline bool write_file(const std::string& path, const void* data, std::size_t n, std::string* err) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    *err = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  std::size_t w = n ? std::fwrite(data, 1, n, f) : 0;
  bool ok = (w == n);
  if (std::fclose(f) != 0) ok = false;
  if (!ok) *err = "cannot write " + path + ": " + std::strerror(errno);
  return ok;
}

inline std::string buffer_json(const Buffer& b) {
  const ArgInfo& a = kArgs[b.arg];
  std::string o = "{";
  o += "\"name\": " + json_str(a.name);
  o += ", \"index\": " + std::to_string(b.arg);
  o += ", \"ctype\": " + json_str(a.ctype);
  o += ", \"dtype\": " + json_str(kDtypeNames[a.dtype]);
  o += ", \"dir\": " + json_str(kDirNames[a.dir]);
  o += ", \"count\": " + json_u64(b.count);
  o += ", \"bytes\": " + json_u64((u64)b.bytes);
  o += ", \"file\": " + (b.wrote_file ? json_str(a.file) : std::string("null"));
  o += ", \"input_file\": " + (b.wrote_input ? json_str(a.in_file) : std::string("null"));
  o += ", \"hash_before\": " + (b.has_hash_before ? json_hex(b.hash_before) : std::string("null"));
  o += ", \"hash_after\": " + (b.has_hash_after ? json_hex(b.hash_after) : std::string("null"));
  o += ", \"digest\": " + (b.has_digest ? json_hex(b.digest) : std::string("null"));
  o += ", \"unwritten\": " + (b.has_digest && a.dir == DIR_OUT ? json_u64(b.unwritten) : std::string("null"));
  o += ", \"poison_byte\": " + (a.dir == DIR_OUT ? std::to_string((unsigned)b.poison) : std::string("null"));
  o += ", \"guarded\": " + std::string(b.guarded ? "true" : "false");
  o += ", \"guard_damage\": " + (b.guarded ? json_u64(b.guard_damage) : std::string("null"));
  if (a.dir == DIR_IN) {
    o += ", \"rep_digests\": null, \"rep_unwritten\": null";
  } else {
    o += ", \"rep_digests\": " + json_list(b.rep_digests, json_hex);
    if (a.dir == DIR_OUT) {
      o += ", \"rep_unwritten\": " + json_list(b.rep_unwritten, json_u64);
    } else {
      o += ", \"rep_unwritten\": null";
    }
  }
  return o + "}";
}

// File names of the outputs and inputs of set i > 0 and of snapshot j: "c.bin" -> "c.s1.bin",
// "c.in.bin" -> "c.s1.in.bin", "c.bin" -> "c.snap0.bin" (set 0 keeps the plain names).
inline std::string file_variant(const char* file, const char* ext, const std::string& tag) {
  std::string f = file;
  const std::string e = ext;
  if (f.size() >= e.size() && f.compare(f.size() - e.size(), e.size(), e) == 0) f.resize(f.size() - e.size());
  return f + "." + tag + e;
}

inline std::string set_json(std::size_t i) {
  const SetResult& r = g_state.set_results[i];
  std::string o = "{\"index\": " + std::to_string(i) + ", \"spec\": " + json_str(r.spec.text);
  o += ", \"seed\": " + json_u64(r.spec.seed) + ", \"pattern\": " + json_str(kPatternNames[r.spec.pattern]);
  o += ", \"launch\": " + (r.spec.has_launch ? json_u64(r.spec.launch) : std::string("null"));
  o += ", \"abs\": " + std::string(r.spec.abs ? "true" : "false");
  o += ", \"prefill\": " + json_str(kPrefillNames[r.spec.prefill]);
  o += ", \"launch_s\": " + (r.launch_s >= 0 ? json_double(r.launch_s) : std::string("null")) + ", \"buffers\": {";
  for (std::size_t k = 0; k < r.bufs.size(); ++k) {
    const SetBuf& sb = r.bufs[k];
    const ArgInfo& a = kArgs[g_state.bufs[k].arg];
    o += std::string(k ? ", " : "") + json_str(a.name) + ": {";
    o += "\"file\": " + (sb.file.empty() ? std::string("null") : json_str(sb.file));
    o += ", \"input_file\": " + (sb.input_file.empty() ? std::string("null") : json_str(sb.input_file));
    o += ", \"hash_before\": " + (sb.has_hash_before ? json_hex(sb.hash_before) : std::string("null"));
    o += ", \"digest\": " + (sb.has_digest ? json_hex(sb.digest) : std::string("null"));
    const bool counted = a.dir == DIR_OUT || (a.dir == DIR_INOUT && r.spec.prefill == PREFILL_COVERAGE);
    o += ", \"unwritten\": " + (sb.has_digest && counted ? json_u64(sb.unwritten) : std::string("null"));
    o += ", \"mutated\": " + (sb.has_mutated ? std::string(sb.mutated ? "true" : "false") : std::string("null"));
    o += "}";
  }
  return o + "}}";
}

inline std::string snapshot_json(std::size_t i) {
  const Snapshot& sn = g_state.snapshots[i];
  const Options& o = g_state.opt;
  std::string j = "{\"index\": " + std::to_string(i) + ", \"launch\": " + std::to_string(sn.launch);
  j += ", \"input_seed\": " + json_u64(o.fresh_inputs ? launch_seed(o.seed, (u64)sn.launch) : o.seed);
  j += ", \"buffers\": {";
  std::size_t k = 0;
  for (const Buffer& b : g_state.bufs) {
    const ArgInfo& a = kArgs[b.arg];
    if (a.dir == DIR_IN) continue;
    u64 digest = 0, unwritten = 0;
    if (k < sn.data.size()) digest_host(sn.data[k].data(), b.count, b.esize, b.poison, &digest, &unwritten);
    j += std::string(k ? ", " : "") + json_str(a.name) + ": {\"file\": " +
         json_str(file_variant(a.file, ".bin", "snap" + std::to_string(i))) + ", \"digest\": " + json_hex(digest) +
         ", \"unwritten\": " + (a.dir == DIR_OUT ? json_u64(unwritten) : std::string("null")) + "}";
    ++k;
  }
  return j + "}}";
}

inline std::string result_json() {
  const State& s = g_state;
  const Options& o = s.opt;
  const ShapeInfo* sh = s.shape_known ? &kShapes[o.shape] : nullptr;
  const bool kernel = std::strcmp(kEntryKind, "global") == 0;
  std::string j = "{\n";
  j += "  \"format\": \"kernellsp-harness/2\",\n";
  j += "  \"status\": " + json_str(s.status) + ",\n";
  j += "  \"error\": " + (s.has_error ? json_str(s.error) : std::string("null")) + ",\n";
  j += "  \"mode\": " + (o.mode.empty() ? std::string("null") : json_str(o.mode)) + ",\n";
  j += "  \"entry\": " + json_str(kEntry) + ",\n";
  j += "  \"entry_kind\": " + json_str(kEntryKind) + ",\n";
  j += "  \"source\": " + json_str(kSourcePath) + ",\n";
  j += "  \"shape\": " + (sh ? std::to_string(o.shape) : std::string("null")) + ",\n";
  j += "  \"num_shapes\": " + std::to_string(kNumShapes) + ",\n";
  j += "  \"seed\": " + json_u64(o.seed) + ",\n";
  j += "  \"poison\": " + json_str(o.poison_alt ? "alt" : "nan") + ",\n";
  j += "  \"sizes\": " + std::string(sh ? sh->sizes_json : "null") + ",\n";
  j += "  \"scalars\": " + std::string(sh ? sh->scalars_json : "null") + ",\n";
  if (sh && kernel) {
    j += "  \"grid\": [" + std::to_string(sh->grid[0]) + ", " + std::to_string(sh->grid[1]) + ", " +
         std::to_string(sh->grid[2]) + "],\n";
    j += "  \"block\": [" + std::to_string(sh->block[0]) + ", " + std::to_string(sh->block[1]) + ", " +
         std::to_string(sh->block[2]) + "],\n";
    j += "  \"smem\": " + json_u64(sh->smem) + ",\n";
  } else {
    j += "  \"grid\": null,\n  \"block\": null,\n  \"smem\": null,\n";
  }
  j += "  \"device\": " + s.device_json + ",\n";
  j += "  \"kernel_attrs\": " + s.attrs_json + ",\n";
  j += "  \"buffers\": [";
  for (std::size_t i = 0; i < s.bufs.size(); ++i) j += std::string(i ? ",\n    " : "\n    ") + buffer_json(s.bufs[i]);
  j += s.bufs.empty() ? "],\n" : "\n  ],\n";
  j += "  \"timings_ms\": " + json_list(s.timings, json_double) + ",\n";
  j += "  \"timings_sync_ms\": " + json_list(s.timings_sync, json_double) + ",\n";
  j += "  \"warmup\": " + std::to_string(o.warmup) + ",\n";
  j += "  \"reps\": " + std::to_string(o.reps) + ",\n";
  j += "  \"fresh_inputs\": " + std::string(o.fresh_inputs ? "true" : "false") + ",\n";
  j += "  \"l2_flush_bytes\": " + json_u64(s.l2_flush_bytes) + ",\n";
  j += "  \"persisting_l2_limit_set\": " + std::string(s.persisting_set ? "true" : "false") + ",\n";
  j += "  \"persisting_l2_error\": " +
       (s.has_persisting_error ? json_str(s.persisting_error) : std::string("null")) + ",\n";
  j += "  \"pad_bytes\": " + json_u64(s.pad_bytes) + ",\n";
  j += "  \"alloc\": {\"kind\": " + json_str(s.alloc_kind) + ", \"granularity\": " + json_u64(s.alloc_granularity) +
       ", \"error\": " + (s.alloc_error.empty() ? std::string("null") : json_str(s.alloc_error)) + "},\n";
  j += "  \"smem_poison\": {\"done\": " + std::string(s.smem_poisoned ? "true" : "false") +
       ", \"bytes_per_sm\": " + json_u64(s.smem_poison_bytes) + ", \"sms_covered\": " +
       (s.smem_sms_covered >= 0 ? std::to_string(s.smem_sms_covered) : std::string("null")) +
       ", \"sm_count\": " + std::to_string(s.sm_count) + ", \"entry_shaped_bytes\": " + json_u64(s.smem_match_bytes) +
       ", \"error\": " + (s.smem_error.empty() ? std::string("null") : json_str(s.smem_error)) + "},\n";
  j += "  \"copy_bandwidth_bytes_per_s\": " + (s.copy_bw > 0 ? json_double(s.copy_bw) : std::string("null")) + ",\n";
  j += "  \"check_launches\": " + std::to_string(o.check_launches) + ",\n";
  j += "  \"host_seconds\": {";
  for (std::size_t i = 0; i < s.host_seconds.size(); ++i)
    j += std::string(i ? ", " : "") + json_str(s.host_seconds[i].first) + ": " + json_double(s.host_seconds[i].second);
  j += "},\n";
  j += "  \"sets\": [";
  for (std::size_t i = 0; i < s.set_results.size(); ++i) j += std::string(i ? ",\n    " : "\n    ") + set_json(i);
  j += s.set_results.empty() ? "],\n" : "\n  ],\n";
  j += "  \"snapshots\": [";
  for (std::size_t i = 0; i < s.snapshots.size(); ++i) j += std::string(i ? ",\n    " : "\n    ") + snapshot_json(i);
  j += s.snapshots.empty() ? "]\n" : "\n  ]\n";
  j += "}\n";
  return j;
}

// Writes result.json (atomically: result.json.tmp, then rename). Exit code 4 when impossible.
inline void write_result() {
  if (!g_state.opt_out_known) return;
  const std::string text = result_json();
  const std::string tmp = path_in_out("result.json.tmp");
  std::string err;
  if (!write_file(tmp, text.data(), text.size(), &err) || std::rename(tmp.c_str(), path_in_out("result.json").c_str()) != 0) {
    std::fprintf(stderr, "kernellsp harness: cannot write result.json in %s: %s\n", g_state.opt.out.c_str(),
                 err.empty() ? std::strerror(errno) : err.c_str());
    std::fflush(stderr);
    std::_Exit(4);
  }
}

[[noreturn]] inline void finish(const char* status, const std::string& msg, int code) {
  g_state.status = status;
  g_state.error = msg;
  g_state.has_error = !msg.empty();
  write_result();
  if (!g_state.opt_out_known && code != 0) {
    std::fprintf(stderr, "kernellsp harness: %s: %s\n", status, msg.c_str());
  }
  // A normal exit: tools attached to the process (ncu, compute-sanitizer) finish their work in
  // exit handlers. result.json is already complete, so nothing the code under test does at exit
  // (static destructors, atexit handlers) can change the outcome; if it crashes there, the
  // exit code changes but result.json stands.
  std::exit(code);
}

inline std::string cuda_msg(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) finish("runtime_error", cuda_msg(what, e), 3);
}
inline void check_io(bool ok, const std::string& err) {
  if (!ok) finish("runtime_error", err, 4);
}

// ------------------------------------------------------------------------------------------------
// Command line

inline bool parse_long(const char* s, long lo, long hi, long* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}
inline bool parse_u64(const char* s, u64* out) {
  if (!s || !*s || *s == '-' || *s == '+') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

// --sets LIST: comma-separated SEED[:PATTERN][@LAUNCH][+abs][~previous|~garbage|~coverage]; without it, one
// set: --seed, spec distribution. ~previous and ~garbage need an earlier set in the list (its outputs are the start).

inline void parse_sets() {
  Options& o = g_state.opt;
  std::vector<SetSpec>& out = g_state.sets;
  if (o.sets.empty()) {
    SetSpec s;
    s.text = std::to_string(o.seed);
    s.seed = o.seed;
    out.push_back(s);
    return;
  }
  if (o.mode != "check" && o.mode != "inputs") finish("bad_args", "--sets is for --mode check or inputs", 2);
  std::size_t pos = 0;
  while (pos <= o.sets.size()) {
    std::size_t end = o.sets.find(',', pos);
    if (end == std::string::npos) end = o.sets.size();
    std::string item = o.sets.substr(pos, end - pos);
    pos = end + 1;
    SetSpec s;
    s.text = item;
    const std::string bad =
        "--sets: '" + item + "' is not SEED[:PATTERN][@LAUNCH][+abs][~previous|~garbage|~coverage]";
    std::size_t tilde = item.find('~');
    if (tilde != std::string::npos) {
      const std::string name = item.substr(tilde + 1);
      if (name == "previous") s.prefill = PREFILL_PREVIOUS;
      else if (name == "garbage") s.prefill = PREFILL_GARBAGE;
      else if (name == "coverage") s.prefill = PREFILL_COVERAGE;
      else finish("bad_args", "--sets: '" + s.text + "': unknown prefill '" + name + "' (previous, garbage or coverage)", 2);
      if (out.empty() && s.prefill != PREFILL_COVERAGE) finish("bad_args", "--sets: '" + s.text + "': the first set has no earlier call to start from", 2);
      item.resize(tilde);
    }
    if (item.size() >= 4 && item.compare(item.size() - 4, 4, "+abs") == 0) {
      s.abs = true;
      item.resize(item.size() - 4);
    }
    std::size_t at = item.find('@');
    if (at != std::string::npos) {
      if (!parse_u64(item.substr(at + 1).c_str(), &s.launch)) finish("bad_args", bad, 2);
      s.has_launch = true;
      item.resize(at);
    }
    std::size_t colon = item.find(':');
    if (colon != std::string::npos) {
      const std::string name = item.substr(colon + 1);
      s.pattern = -1;
      for (int p = 0; p < kNumPatterns; ++p)
        if (name == kPatternNames[p]) s.pattern = p;
      if (s.pattern < 0)
        finish("bad_args", "--sets: unknown pattern '" + name + "' (spec, spikes, alternating, ramp or wide)", 2);
      item.resize(colon);
    }
    if (!parse_u64(item.c_str(), &s.seed)) finish("bad_args", bad, 2);
    if (s.has_launch && s.pattern != PAT_SPEC)
      finish("bad_args", "--sets: '" + s.text + "': @LAUNCH takes the spec's distribution, not a pattern", 2);
    if (s.has_launch && o.mode == "inputs")
      finish("bad_args", "--sets: '" + s.text + "': @LAUNCH inputs are drawn on the GPU; inputs mode has none", 2);
    out.push_back(s);
    if (out.size() > 256) finish("bad_args", "--sets: at most 256 sets", 2);
    if (end == o.sets.size()) break;
  }
}

inline void parse_args(int argc, char** argv) {
  Options& o = g_state.opt;
  // First pass: find --out so that every later error can be reported in result.json.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) o.out = argv[i + 1];
    else if (a.rfind("--out=", 0) == 0) o.out = a.substr(6);
  }
  if (o.out.empty()) finish("bad_args", "--out DIR is required", 2);
  if (mkdir(o.out.c_str(), 0777) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "kernellsp harness: cannot create %s: %s\n", o.out.c_str(), std::strerror(errno));
    std::_Exit(4);
  }
  g_state.opt_out_known = true;
  bool have_mode = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string val;
    bool has_val = false;
    std::size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_val = true;
    }
    auto need = [&](const char* flag) -> const char* {
      if (has_val) return val.c_str();
      if (i + 1 >= argc) finish("bad_args", std::string(flag) + " needs a value", 2);
      return argv[++i];
    };
    if (a == "--mode") {
      o.mode = need("--mode");
      have_mode = true;
      if (o.mode != "check" && o.mode != "time" && o.mode != "profile" && o.mode != "inputs")
        finish("bad_args", "--mode must be check, time, profile or inputs, got '" + o.mode + "'", 2);
    } else if (a == "--out") {
      need("--out");
    } else if (a == "--shape") {
      const char* v = need("--shape");
      if (!parse_long(v, 0, kNumShapes - 1, &o.shape))
        finish("bad_args", std::string("--shape must be an integer in 0..") + std::to_string(kNumShapes - 1) +
                               ", got '" + v + "'", 2);
    } else if (a == "--seed") {
      const char* v = need("--seed");
      if (!parse_u64(v, &o.seed)) finish("bad_args", std::string("--seed must be an unsigned 64-bit integer, got '") + v + "'", 2);
    } else if (a == "--reps") {
      const char* v = need("--reps");
      if (!parse_long(v, 1, 1000000, &o.reps)) finish("bad_args", std::string("--reps must be in 1..1000000, got '") + v + "'", 2);
    } else if (a == "--warmup") {
      const char* v = need("--warmup");
      if (!parse_long(v, 0, 1000000, &o.warmup)) finish("bad_args", std::string("--warmup must be in 0..1000000, got '") + v + "'", 2);
    } else if (a == "--device") {
      const char* v = need("--device");
      if (!parse_long(v, 0, 1023, &o.device)) finish("bad_args", std::string("--device must be in 0..1023, got '") + v + "'", 2);
    } else if (a == "--poison") {
      std::string v = need("--poison");
      if (v == "nan") o.poison_alt = false;
      else if (v == "alt") o.poison_alt = true;
      else finish("bad_args", "--poison must be nan or alt, got '" + v + "'", 2);
    } else if (a == "--dump-inputs" && !has_val) {
      o.dump_inputs = true;
    } else if (a == "--fresh-inputs" && !has_val) {
      o.fresh_inputs = true;
    } else if (a == "--dump-last" && !has_val) {
      o.dump_last = true;
    } else if (a == "--sets") {
      o.sets = need("--sets");
    } else if (a == "--check-launches") {
      const char* v = need("--check-launches");
      if (!parse_long(v, 0, 64, &o.check_launches))
        finish("bad_args", std::string("--check-launches must be in 0..64, got '") + v + "'", 2);
    } else if (a == "--cubin") {
      o.cubin = need("--cubin");
    } else if (a == "--alloc") {
      std::string v = need("--alloc");
      if (v == "guard") o.alloc_plain = false;
      else if (v == "plain") o.alloc_plain = true;
      else finish("bad_args", "--alloc must be guard or plain, got '" + v + "'", 2);
    } else {
      finish("bad_args", "unknown argument '" + std::string(argv[i]) + "'", 2);
    }
  }
  if (!have_mode) finish("bad_args", "--mode check|time|profile|inputs is required", 2);
  g_state.shape_known = true;
  parse_sets();
}

// ------------------------------------------------------------------------------------------------
// Buffers

inline unsigned char poison_byte(int dtype, bool alt) {
  const bool f = dtype <= DT_F64;
  // 0xFF.. is a NaN in f16, bf16, f32 and f64; 0xF7.. is a large negative finite number in all four.
  if (f) return alt ? 0xF7 : 0xFF;
  return alt ? 0x5A : 0xA5;
}

inline void make_buffers() {
  const ShapeInfo& sh = kShapes[g_state.opt.shape];
  for (int a = 0; a < kNumArgs; ++a) {
    if (kArgs[a].dir == DIR_SCALAR) continue;
    Buffer b;
    b.arg = a;
    b.count = sh.counts[a];
    b.esize = kDtypeBytes[kArgs[a].dtype];
    b.bytes = (std::size_t)(b.count * (u64)b.esize);
    b.poison = poison_byte(kArgs[a].dtype, g_state.opt.poison_alt);
    g_state.bufs.push_back(b);
  }
}

// Fills the host copy of every in/inout buffer for set `i` (its seed, pattern and |x| modifier). Set 0
// also sets the legacy per-buffer fields (hash_before, input_file); --dump-inputs (and mode inputs)
// write the bytes, set i > 0 as <stem>.s<i>.in.bin. `r` (may be null) receives the per-set fields.
inline void fill_host_set(std::size_t i, SetResult* r) {
  const ShapeInfo& sh = kShapes[g_state.opt.shape];
  const SetSpec& ss = g_state.sets[i];
  const bool dump = g_state.opt.dump_inputs || g_state.opt.mode == "inputs";
  for (std::size_t k = 0; k < g_state.bufs.size(); ++k) {
    Buffer& b = g_state.bufs[k];
    const ArgInfo& a = kArgs[b.arg];
    if (a.dir == DIR_OUT) continue;
    b.init.assign(b.bytes, 0);
    const u64 key = stream_key(ss.seed, b.arg);
    const Dist& d = sh.dists[b.arg];
    unsigned char* data = b.init.data();
    const u64 count = b.count;
    const int dtype = a.dtype, pattern = ss.pattern, esize = b.esize;
    const bool absolute = ss.abs && a.dtype <= DT_F64;
    parallel_chunks(count, [=, &d](u64 lo, u64 hi) {
      for (u64 j = lo; j < hi; ++j) fill_pattern_one(data, j, count, dtype, d, key, pattern);
      if (absolute)
        for (u64 j = lo; j < hi; ++j) abs_elem(data, j, esize);
    });
    const bool hashed = i == 0 || dump;
    const u64 h = hashed ? fnv1a64(b.init.data(), b.bytes) : 0;
    if (i == 0) {
      b.hash_before = h;
      b.has_hash_before = true;
    }
    if (r != nullptr && hashed) {
      r->bufs[k].hash_before = h;
      r->bufs[k].has_hash_before = true;
    }
    if (dump) {
      const std::string name = i == 0 ? std::string(a.in_file) : file_variant(a.in_file, ".in.bin", "s" + std::to_string(i));
      std::string err;
      check_io(write_file(path_in_out(name.c_str()), b.init.data(), b.bytes, &err), err);
      if (i == 0) b.wrote_input = true;
      if (r != nullptr) r->bufs[k].input_file = name;
    }
  }
}

// Entropy from the OS, the clock and the pid: never derivable from the seed (or by the code under test).
inline u64 os_entropy() {
  u64 e = (u64)std::chrono::steady_clock::now().time_since_epoch().count() ^ ((u64)getpid() << 17);
  try {
    std::random_device rd;
    e ^= ((u64)rd() << 32) ^ (u64)rd();
  } catch (...) {
    // no entropy device: the clock and the pid still vary between runs
  }
  return mix64(e);
}

// ------------------------------------------------------------------------------------------------
// Guard pages (CUDA virtual memory management)
//
// Each buffer gets its own reserved address range: an unmapped granule, the mapped granules that hold
// the buffer, another unmapped granule. The buffer is placed at the END of its mapped range, rounded up
// to 16 bytes, so an access past its end (beyond that rounding) faults at full speed in every run, and
// one far before its start faults too. 16 bytes, not cudaMalloc's 256: every access the hardware has
// (vector loads, cp.async, TMA) needs at most 16-byte alignment, and a 256-byte rounding would hide
// reads up to 255 bytes past the end. The mapped bytes below the buffer and the rounding above it hold
// a canary that is checked after every launch, so writes there are caught too; reads there are left to
// compute-sanitizer memcheck, which runs with --alloc plain (exact cudaMalloc sizes). The entry points
// come through cudaGetDriverEntryPoint*, so no -lcuda is needed and a driver without them means plain
// allocations (result.json says why), not a failed build.

constexpr unsigned char kCanary = 0xC3;

struct Vmm {
  std::size_t gran = 0;
  CUmemAllocationProp prop;
  CUmemAccessDesc access;
  CUresult (*get_granularity)(std::size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, std::size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*map)(CUdeviceptr, std::size_t, std::size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*set_access)(CUdeviceptr, std::size_t, const CUmemAccessDesc*, std::size_t) = nullptr;
};

// ``version``: the CUDA version whose signature of the entry point the caller uses (the lowest that has it).
inline bool driver_entry(const char* name, void** fn, std::string* err, int version = 12000) {
#if CUDART_VERSION >= 12000
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, version, cudaEnableDefault, &q);
#else
  (void)version;
  cudaError_t e = cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, &q);
#endif
  if (e == cudaSuccess && q == cudaDriverEntryPointSuccess && *fn != nullptr) return true;
  cudaGetLastError();
  *err = std::string("the driver entry point ") + name + " is unavailable";
  return false;
#else
  (void)name;
  (void)fn;
  (void)version;
  *err = "the CUDA runtime is older than 12.0";
  return false;
#endif
}

inline bool vmm_load(Vmm* v, int device, std::string* err) {
  if (!driver_entry("cuMemGetAllocationGranularity", (void**)&v->get_granularity, err) ||
      !driver_entry("cuMemAddressReserve", (void**)&v->reserve, err) ||
      !driver_entry("cuMemCreate", (void**)&v->create, err) || !driver_entry("cuMemMap", (void**)&v->map, err) ||
      !driver_entry("cuMemSetAccess", (void**)&v->set_access, err))
    return false;
  std::memset(&v->prop, 0, sizeof v->prop);
  v->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  v->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  v->prop.location.id = device;
  std::memset(&v->access, 0, sizeof v->access);
  v->access.location = v->prop.location;
  v->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUresult r = v->get_granularity(&v->gran, &v->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS || v->gran == 0) {
    *err = "cuMemGetAllocationGranularity failed (CUresult " + std::to_string((int)r) + ")";
    return false;
  }
  return true;
}

inline bool vmm_place(const Vmm& v, Buffer& b, std::string* err) {
  const std::size_t need = (b.bytes + 15) / 16 * 16;
  const std::size_t mapped = (need + v.gran - 1) / v.gran * v.gran;
  CUdeviceptr base = 0;
  CUmemGenericAllocationHandle h = 0;
  CUresult r = v.reserve(&base, mapped + 2 * v.gran, v.gran, 0, 0);
  const char* step = "cuMemAddressReserve";
  if (r == CUDA_SUCCESS) {
    step = "cuMemCreate";
    r = v.create(&h, mapped, &v.prop, 0);
  }
  if (r == CUDA_SUCCESS) {
    step = "cuMemMap";
    r = v.map(base + v.gran, mapped, 0, h, 0);
  }
  if (r == CUDA_SUCCESS) {
    step = "cuMemSetAccess";
    r = v.set_access(base + v.gran, mapped, &v.access, 1);
  }
  if (r != CUDA_SUCCESS) {
    *err = std::string(step) + " failed for " + kArgs[b.arg].name + " (" + std::to_string(b.bytes) + " bytes, CUresult " +
           std::to_string((int)r) + ")";
    return false;
  }
  unsigned char* lo = (unsigned char*)(uintptr_t)(base + v.gran);
  unsigned char* p = lo + (mapped - need);
  b.dev = p;
  b.guarded = true;
  b.slack_lo = lo;
  b.slack_lo_bytes = mapped - need;
  b.slack_hi = p + b.bytes;
  b.slack_hi_bytes = need - b.bytes;
  return true;
}

// Device digest (and count of elements equal to `pattern`) of `count` elements of `esize` bytes at p.
inline void device_digest(const void* p, u64 count, int esize, unsigned char pattern, u64* digest, u64* matches) {
  static u64* acc = nullptr;
  if (acc == nullptr) check(cudaMalloc(&acc, 2 * sizeof(u64)), "cudaMalloc(digest)");
  check(cudaMemset(acc, 0, 2 * sizeof(u64)), "cudaMemset(digest)");
  kernellsp_h_digest_kernel<<<(unsigned)(g_state.sm_count * 4), 256>>>((const unsigned char*)p, count, esize, pattern,
                                                                        acc);
  check(cudaGetLastError(), "digest kernel");
  u64 h[2] = {0, 0};
  check(cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost), "cudaMemcpy(digest)");
  *digest = h[0];
  *matches = h[1];
}

inline void fill_canaries() {
  for (Buffer& b : g_state.bufs) {
    if (!b.guarded) continue;
    if (b.slack_lo_bytes) check(cudaMemset(b.slack_lo, kCanary, b.slack_lo_bytes), "cudaMemset(guard canary)");
    if (b.slack_hi_bytes) check(cudaMemset(b.slack_hi, kCanary, b.slack_hi_bytes), "cudaMemset(guard canary)");
  }
}

// Counts canary bytes that changed since the last check (writes outside a buffer that did not reach
// its guard page) into guard_damage, and restores them.
inline void check_guards() {
  for (Buffer& b : g_state.bufs) {
    if (!b.guarded) continue;
    unsigned char* parts[2] = {b.slack_lo, b.slack_hi};
    const std::size_t sizes[2] = {b.slack_lo_bytes, b.slack_hi_bytes};
    for (int k = 0; k < 2; ++k) {
      if (sizes[k] == 0) continue;
      u64 digest = 0, same = 0;
      device_digest(parts[k], sizes[k], 1, kCanary, &digest, &same);
      if (same != sizes[k]) {
        b.guard_damage += sizes[k] - same;
        check(cudaMemset(parts[k], kCanary, sizes[k]), "cudaMemset(restore guard canary)");
      }
    }
  }
}

// Buffers in random order, with a random-sized stretch before each (unmapped address space with guard
// pages; a cudaMalloc'd pad with --alloc plain), so that buffer addresses differ between runs (defeats
// results cached on pointers). Nothing is freed before exit.
inline void allocate_buffers() {
  u64 st = mix64(os_entropy() ^ mix64(g_state.opt.seed));
  auto next = [&]() { st = mix64(st + kGamma); return st; };
  std::vector<std::size_t> order(g_state.bufs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[(std::size_t)(next() % i)]);
  if (!g_state.opt.alloc_plain) {
    Vmm v;
    std::string why;
    check(cudaFree(nullptr), "cudaFree(0) (context)");
    if (vmm_load(&v, (int)g_state.opt.device, &why)) {
      g_state.alloc_kind = "guard";
      g_state.alloc_granularity = v.gran;
      for (std::size_t i : order) {
        Buffer& b = g_state.bufs[i];
        CUdeviceptr pad = 0;
        const std::size_t pad_bytes = (std::size_t)(1 + next() % 8) * v.gran;
        if (v.reserve(&pad, pad_bytes, v.gran, 0, 0) == CUDA_SUCCESS) g_state.pad_bytes += pad_bytes;
        if (!vmm_place(v, b, &why)) {  // this buffer without a guard page; the others keep theirs
          if (g_state.alloc_error.empty()) g_state.alloc_error = why;
          std::string what = std::string("cudaMalloc(") + kArgs[b.arg].name + ", " + std::to_string(b.bytes) + " bytes)";
          check(cudaMalloc(&b.dev, b.bytes), what.c_str());
        }
      }
      fill_canaries();
      return;
    }
    g_state.alloc_error = why;
  }
  g_state.alloc_kind = "plain";
  void* pad = nullptr;
  std::size_t first = (std::size_t)(1 + next() % 32768) * 256;  // 256 B .. 8 MiB
  check(cudaMalloc(&pad, first), "cudaMalloc(pad)");
  g_state.pad_bytes += first;
  for (std::size_t i : order) {
    Buffer& b = g_state.bufs[i];
    std::size_t gap = (std::size_t)(1 + next() % 64) * 256;  // 256 B .. 16 KiB
    check(cudaMalloc(&pad, gap), "cudaMalloc(pad)");
    g_state.pad_bytes += gap;
    std::string what = std::string("cudaMalloc(") + kArgs[b.arg].name + ", " + std::to_string(b.bytes) + " bytes)";
    check(cudaMalloc(&b.dev, b.bytes), what.c_str());
  }
}

inline void upload_inputs() {
  for (Buffer& b : g_state.bufs) {
    if (kArgs[b.arg].dir == DIR_OUT || b.init.size() != b.bytes) continue;
    check(cudaMemcpy(b.dev, b.init.data(), b.bytes, cudaMemcpyHostToDevice), "cudaMemcpy(upload input)");
  }
}

inline void upload_fresh_dists() {
  const ShapeInfo& sh = kShapes[g_state.opt.shape];
  for (Buffer& b : g_state.bufs) {
    if (kArgs[b.arg].dir == DIR_OUT) continue;
    Dist d = sh.dists[b.arg];
    if (d.n > 0) {
      double* df = nullptr;
      i64* di = nullptr;
      check(cudaMalloc(&df, sizeof(double) * (std::size_t)d.n), "cudaMalloc(dist)");
      check(cudaMalloc(&di, sizeof(i64) * (std::size_t)d.n), "cudaMalloc(dist)");
      check(cudaMemcpy(df, d.f, sizeof(double) * (std::size_t)d.n, cudaMemcpyHostToDevice), "cudaMemcpy(dist)");
      check(cudaMemcpy(di, d.i, sizeof(i64) * (std::size_t)d.n, cudaMemcpyHostToDevice), "cudaMemcpy(dist)");
      d.f = df;
      d.i = di;
    }
    b.dev_dist = d;
  }
}

// Before each launch (never timed): poison every out buffer, restore every inout buffer from the host
// copy (or, with --fresh-inputs in time mode, draw new in/inout contents on the device).
inline void prepare_launch(bool fresh, u64 launch_index, int sm_count) {
  for (Buffer& b : g_state.bufs) {
    const ArgInfo& a = kArgs[b.arg];
    if (a.dir == DIR_OUT) {
      check(cudaMemset(b.dev, b.poison, b.bytes), "cudaMemset(poison output)");
    } else if (fresh) {
      const u64 key = stream_key(launch_seed(g_state.opt.seed, launch_index), b.arg);
      kernellsp_h_fill_kernel<<<(unsigned)(sm_count * 4), 256>>>(b.dev, b.count, a.dtype, b.dev_dist, key);
      check(cudaGetLastError(), "fill kernel (fresh inputs)");
    } else if (a.dir == DIR_INOUT) {
      check(cudaMemcpy(b.dev, b.init.data(), b.bytes, cudaMemcpyHostToDevice), "cudaMemcpy(restore inout)");
    }
  }
}

// The in/inout buffers drawn on the device with `seed` (the fill of a time-mode launch under
// --fresh-inputs, whose seed is launch_seed(--seed, launch)); `abs`: then |x| of the float ones.
inline void fill_device_inputs(u64 seed, bool abs, int sm_count) {
  for (Buffer& b : g_state.bufs) {
    const ArgInfo& a = kArgs[b.arg];
    if (a.dir == DIR_OUT) continue;
    kernellsp_h_fill_kernel<<<(unsigned)(sm_count * 4), 256>>>(b.dev, b.count, a.dtype, b.dev_dist, stream_key(seed, b.arg));
    check(cudaGetLastError(), "fill kernel");
    if (abs && a.dtype <= DT_F64) {
      kernellsp_h_abs_kernel<<<(unsigned)(sm_count * 4), 256>>>((unsigned char*)b.dev, b.count, b.esize);
      check(cudaGetLastError(), "abs kernel");
    }
  }
}

// Shared memory keeps whatever the last kernel on an SM left in it, across launches and processes: a
// kernel that reads shared memory it never wrote sees the previous launch's values (often the
// baseline's, computed on the same inputs) and passes. Before every launch of the entry (never timed),
// a harness kernel writes the poison pattern (all 0xFF bytes, a NaN; 0xF7 with --poison alt) over the
// whole shared memory of every SM: one block per SM at the largest dynamic shared memory a block may
// have. The first call reads back which SMs its blocks ran on (smem_poison.sms_covered) and launches
// more blocks until every SM was covered. The driver sizes each kernel's shared memory carve-out
// (the L1/shared split) for that kernel, and what a block sees after the split changed is not the
// previous split's contents; so a second launch, shaped like the entry's (its threads and its static
// plus dynamic shared memory per block, as many blocks as fit on every SM), poisons the entry's own
// configuration (kernel entries; a host launcher's kernels are unknown). Not done in profile mode,
// where ncu must see the entry alone.
inline void poison_shared_memory() {
  static bool configured = false, broken = false;
  static unsigned words = 0, blocks = 0, match_words = 0, match_threads = 0, match_blocks = 0;
  State& s = g_state;
  if (broken) return;
  const unsigned pattern = s.opt.poison_alt ? 0xF7F7F7F7u : 0xFFFFFFFFu;
  if (configured) {
    kernellsp_h_smem_poison_kernel<<<blocks, 1024, (std::size_t)words * 4>>>(pattern, words, nullptr);
    check(cudaGetLastError(), "shared memory poison kernel");
    if (match_blocks) {
      kernellsp_h_smem_poison_kernel<<<match_blocks, match_threads, (std::size_t)match_words * 4>>>(pattern, match_words,
                                                                                                  nullptr);
      check(cudaGetLastError(), "shared memory poison kernel (entry-shaped)");
    }
    return;
  }
  configured = true;
  int optin = 0;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, (int)s.opt.device) != cudaSuccess ||
      optin <= 0) {
    cudaGetLastError();
    optin = 48 * 1024;
  }
  if (optin > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(kernellsp_h_smem_poison_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (e != cudaSuccess) {
      cudaGetLastError();
      s.smem_error = cuda_msg("cudaFuncSetAttribute(shared memory poison)", e) + "; poisoning 48 KiB per block";
      optin = 48 * 1024;
    }
  }
  words = (unsigned)optin / 4;
  s.smem_poison_bytes = (u64)words * 4;
  if (s.entry_is_kernel) {
    const ShapeInfo& sh = kShapes[s.opt.shape];
    const u64 threads = (u64)sh.block[0] * sh.block[1] * sh.block[2];
    const u64 bytes = s.entry_static_smem + sh.smem;
    int per_sm = 0;
    if (threads >= 1 && threads <= 1024 && bytes > 0 &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernellsp_h_smem_poison_kernel, (int)threads,
                                                      (std::size_t)((bytes + 3) / 4 * 4)) == cudaSuccess &&
        per_sm > 0) {
      match_threads = (unsigned)threads;
      match_words = (unsigned)((bytes + 3) / 4);
      match_blocks = (unsigned)(2 * per_sm * s.sm_count);
      s.smem_match_bytes = (u64)match_words * 4;
    }
    cudaGetLastError();
  }
  unsigned* seen = nullptr;
  check(cudaMalloc(&seen, 64 * sizeof(unsigned)), "cudaMalloc(shared memory poison map)");
  blocks = (unsigned)(2 * s.sm_count);
  for (int attempt = 0; attempt < 3; ++attempt) {
    check(cudaMemset(seen, 0, 64 * sizeof(unsigned)), "cudaMemset(shared memory poison map)");
    kernellsp_h_smem_poison_kernel<<<blocks, 1024, (std::size_t)words * 4>>>(pattern, words, seen);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      s.smem_error = cuda_msg("shared memory poison kernel", e);
      broken = true;
      return;
    }
    unsigned map[64];
    check(cudaMemcpy(map, seen, sizeof map, cudaMemcpyDeviceToHost), "cudaMemcpy(shared memory poison map)");
    long covered = 0;
    for (unsigned w : map) covered += __builtin_popcount(w);
    s.smem_sms_covered = covered;
    s.smem_poisoned = true;
    if (covered >= s.sm_count) break;
    blocks *= 4;  // some SM got no block: more blocks (each SM still holds only one at a time)
  }
  if (match_blocks) {
    kernellsp_h_smem_poison_kernel<<<match_blocks, match_threads, (std::size_t)match_words * 4>>>(pattern, match_words,
                                                                                                nullptr);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      s.smem_error = cuda_msg("shared memory poison kernel (entry-shaped)", e);
      match_blocks = 0;
      s.smem_match_bytes = 0;
    }
  }
}

inline void poison_inouts() {
  for (Buffer& b : g_state.bufs) {
    if (kArgs[b.arg].dir == DIR_INOUT) check(cudaMemset(b.dev, b.poison, b.bytes), "cudaMemset(poison inout)");
  }
}

inline void poison_outputs() {
  for (Buffer& b : g_state.bufs) {
    if (kArgs[b.arg].dir == DIR_OUT) check(cudaMemset(b.dev, b.poison, b.bytes), "cudaMemset(poison output)");
  }
}

// The "~garbage" prefill: every out buffer's current contents (an earlier call's results) rotated by a
// seed-derived number of elements, 1..count-1 (a one-element output keeps its earlier value).
inline void shift_outputs(u64 seed, std::vector<unsigned char>& host) {
  for (Buffer& b : g_state.bufs) {
    if (kArgs[b.arg].dir != DIR_OUT || b.count < 2) continue;
    host.assign(b.bytes, 0);
    check(cudaMemcpy(host.data(), b.dev, b.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(read back for prefill)");
    const u64 shift = 1 + mix64(seed ^ (u64)(b.arg + 1)) % (b.count - 1);
    std::rotate(host.begin(), host.begin() + (std::ptrdiff_t)(shift * (u64)b.esize), host.end());
    check(cudaMemcpy(b.dev, host.data(), b.bytes, cudaMemcpyHostToDevice), "cudaMemcpy(prefill outputs)");
  }
}

// Time mode: a device-to-device copy of `bytes` (twice the L2, so it streams from DRAM), best of three:
// read plus written bytes per second. The timing gate's floor for a kernel is the bytes its spec says
// it must move at this rate. 0 when the scratch buffer cannot be had.
inline double probe_copy_bandwidth(void* src, u64 bytes) {
  void* dst = nullptr;
  if (bytes == 0 || cudaMalloc(&dst, (std::size_t)bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0.0;
  }
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  double best = 0.0;
  for (int r = 0; r < 3; ++r) {
    // src first, then dst: the copy reads lines the dst fill evicted from L2.
    check(cudaMemsetAsync(src, r + 1, (std::size_t)bytes, 0), "cudaMemsetAsync(bandwidth probe)");
    check(cudaMemsetAsync(dst, r + 2, (std::size_t)bytes, 0), "cudaMemsetAsync(bandwidth probe)");
    check(cudaEventRecord(a, 0), "cudaEventRecord");
    check(cudaMemcpyAsync(dst, src, (std::size_t)bytes, cudaMemcpyDeviceToDevice, 0), "cudaMemcpyAsync(bandwidth probe)");
    check(cudaEventRecord(b, 0), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    if (ms > 0.0f) best = std::max(best, 2.0 * (double)bytes / ((double)ms * 1e-3));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  check(cudaFree(dst), "cudaFree(bandwidth probe)");  // harness scratch only: no data of the entry was ever in it
  return best;
}

// ------------------------------------------------------------------------------------------------
// The device-only build's entry (--cubin)
//
// kernellsp compiles the user's file with `nvcc -cubin` (cicc and ptxas only: no host compile, no link)
// and runs a harness whose entry unit holds no user code, built once per plan. The entry is the single
// function of the cubin whose demangled name is kEntry (an internal-linkage kernel's name counts too);
// anything else (none, several, another parameter list) is a launch_error whose message starts with
// "cubin entry:", on which kernellsp builds the harness the usual way instead.

struct Cubin {
  bool loaded = false;
  bool params_checked = false;
  CUfunction fn = nullptr;
  CUresult (*module_load)(CUmodule*, const char*) = nullptr;
  CUresult (*function_count)(unsigned int*, CUmodule) = nullptr;
  CUresult (*enumerate)(CUfunction*, unsigned int, CUmodule) = nullptr;
  CUresult (*get_name)(const char**, CUfunction) = nullptr;
  CUresult (*param_info)(CUfunction, std::size_t, std::size_t*, std::size_t*) = nullptr;
  CUresult (*get_attr)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*set_attr)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void**, void**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
};
static Cubin g_cubin;

inline std::string cu_msg(const std::string& what, CUresult r) {
  const char* s = nullptr;
  if (g_cubin.error_string == nullptr || g_cubin.error_string(r, &s) != CUDA_SUCCESS || s == nullptr) s = "unknown error";
  return what + ": " + s + " (CUresult " + std::to_string((int)r) + ")";
}

[[noreturn]] inline void cubin_failed(const std::string& msg) { finish("launch_error", "cubin entry: " + msg, 3); }

// The name part of a demangled signature: "ns::f<int>(float*, int)" -> "ns::f<int>".
inline std::string demangled_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = (status == 0 && d != nullptr) ? std::string(d) : std::string(mangled);
  std::free(d);
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    else if (s[i] == '>') --depth;
    else if (s[i] == '(' && depth == 0) return s.substr(0, i);
  }
  return s;
}

// Whether a demangled name is the entry: the name itself, or the name inside an anonymous namespace
// (a static __global__ function).
inline bool is_entry_name(const std::string& n) {
  const std::string e = kEntry;
  if (n == e) return true;
  const std::string tail = "::" + e;
  if (n.size() <= tail.size() || n.compare(n.size() - tail.size(), tail.size(), tail) != 0) return false;
  const std::string scope = n.substr(0, n.size() - tail.size());
  return scope == "(anonymous namespace)" || scope.rfind("_INTERNAL", 0) == 0;
}

inline void cubin_load_entry_points() {
  std::string err;
  struct Need {
    const char* name;
    void** fn;
    int version;
  } needs[] = {
      {"cuModuleLoad", (void**)&g_cubin.module_load, 12000},
      {"cuModuleGetFunctionCount", (void**)&g_cubin.function_count, 12040},
      {"cuModuleEnumerateFunctions", (void**)&g_cubin.enumerate, 12040},
      {"cuFuncGetName", (void**)&g_cubin.get_name, 12030},
      {"cuFuncGetAttribute", (void**)&g_cubin.get_attr, 12000},
      {"cuFuncSetAttribute", (void**)&g_cubin.set_attr, 12000},
      {"cuLaunchKernel", (void**)&g_cubin.launch, 12000},
      {"cuGetErrorString", (void**)&g_cubin.error_string, 12000},
  };
  for (const Need& n : needs)
    if (!driver_entry(n.name, n.fn, &err, n.version)) cubin_failed(err + " (the driver is older than CUDA 12.4)");
  // Optional: only a check of the parameter sizes.
  if (!driver_entry("cuFuncGetParamInfo", (void**)&g_cubin.param_info, &err, 12040)) g_cubin.param_info = nullptr;
}

inline CUfunction cubin_function() {
  if (g_cubin.loaded) return g_cubin.fn;
  g_cubin.loaded = true;
  const std::string& path = g_state.opt.cubin;
  if (path.empty()) cubin_failed("this harness holds no user code; it needs --cubin FILE");
  cubin_load_entry_points();
  check(cudaFree(nullptr), "cudaFree(nullptr) (context)");
  CUmodule mod = nullptr;
  CUresult r = g_cubin.module_load(&mod, path.c_str());
  if (r != CUDA_SUCCESS) cubin_failed(cu_msg("cuModuleLoad(" + path + ")", r));
  unsigned int n = 0;
  r = g_cubin.function_count(&n, mod);
  if (r != CUDA_SUCCESS) cubin_failed(cu_msg("cuModuleGetFunctionCount", r));
  std::vector<CUfunction> fns(n);
  if (n > 0) {
    r = g_cubin.enumerate(fns.data(), n, mod);
    if (r != CUDA_SUCCESS) cubin_failed(cu_msg("cuModuleEnumerateFunctions", r));
  }
  std::string names;
  int found = 0;
  for (CUfunction f : fns) {
    const char* mangled = nullptr;
    if (g_cubin.get_name(&mangled, f) != CUDA_SUCCESS || mangled == nullptr) continue;
    const std::string name = demangled_name(mangled);
    if (!names.empty()) names += ", ";
    names += name;
    if (is_entry_name(name)) {
      ++found;
      g_cubin.fn = f;
    }
  }
  if (found != 1)
    cubin_failed(std::to_string(found) + " functions called " + kEntry + " in " + path + " (it has: " +
                 (names.empty() ? std::string("none") : names) + ")");
  return g_cubin.fn;
}

}  // namespace kernellsp_h

// Not inline: the entry unit of a device-only build calls them from its glue.
cudaError_t kernellsp_h::cubin_prepare(int shape) {
  CUfunction fn = cubin_function();
  const int smem = (int)launch_smem(shape);
  if (smem > 48 * 1024 &&
      g_cubin.set_attr(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem) != CUDA_SUCCESS)
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

bool kernellsp_h::cubin_attributes(cudaFuncAttributes* attr) {
  CUfunction fn = cubin_function();
  struct Field {
    CUfunction_attribute a;
    int* v;
  };
  int regs = 0, shared = 0, cnst = 0, local = 0, threads = 0, dyn = 0, ptx = 0, bin = 0;
  const Field fields[] = {
      {CU_FUNC_ATTRIBUTE_NUM_REGS, &regs},
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &shared},
      {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, &cnst},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &local},
      {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &threads},
      {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &dyn},
      {CU_FUNC_ATTRIBUTE_PTX_VERSION, &ptx},
      {CU_FUNC_ATTRIBUTE_BINARY_VERSION, &bin},
  };
  for (const Field& f : fields)
    if (g_cubin.get_attr(f.v, f.a, fn) != CUDA_SUCCESS) return false;
  attr->numRegs = regs;
  attr->sharedSizeBytes = (std::size_t)shared;
  attr->constSizeBytes = (std::size_t)cnst;
  attr->localSizeBytes = (std::size_t)local;
  attr->maxThreadsPerBlock = threads;
  attr->maxDynamicSharedSizeBytes = dyn;
  attr->ptxVersion = ptx;
  attr->binaryVersion = bin;
  return true;
}

void kernellsp_h::cubin_launch(int shape, void** args, const std::size_t* sizes, int nargs) {
  CUfunction fn = cubin_function();
  if (g_cubin.param_info != nullptr && !g_cubin.params_checked) {
    g_cubin.params_checked = true;
    // The parameter list the cubin has must be the one the glue passes (the plan came from the source text).
    for (int i = 0; i <= nargs; ++i) {
      std::size_t off = 0, size = 0;
      const bool have = g_cubin.param_info(fn, (std::size_t)i, &off, &size) == CUDA_SUCCESS;
      if (i == nargs && have)
        cubin_failed(std::string(kEntry) + " in the cubin takes more than " + std::to_string(nargs) + " parameters");
      if (i < nargs && (!have || size != sizes[i]))
        cubin_failed("parameter " + std::to_string(i) + " of " + kEntry + " in the cubin is " +
                     (have ? std::to_string(size) + " bytes" : std::string("missing")) + ", the plan's is " +
                     std::to_string(sizes[i]) + " bytes");
    }
  }
  const ShapeInfo& s = kShapes[shape];
  const CUresult r = g_cubin.launch(fn, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2],
                                    (unsigned)s.smem, nullptr, args, nullptr);
  if (r != CUDA_SUCCESS) finish("launch_error", cu_msg(kEntry, r), 3);
}

namespace kernellsp_h {

inline void entry_prepare_checked() {
  cudaError_t e = entry_prepare((int)g_state.opt.shape);
  if (e != cudaSuccess) finish("launch_error", cuda_msg("cudaFuncSetAttribute(max dynamic shared memory)", e), 3);
}

// Not inline: the split build's entry unit calls it (through call_launcher) from the runtime unit.
void launcher_failed(const char* name, cudaError_t e) { finish("launch_error", cuda_msg(name, e), 3); }

inline void launch_checked(void* const* ptrs) {
  entry_launch((int)g_state.opt.shape, ptrs);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) finish("launch_error", cuda_msg(kEntry, e), 3);
}
inline void sync_checked() {
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) finish("runtime_error", cuda_msg("cudaDeviceSynchronize after the entry", e), 3);
  e = cudaGetLastError();
  if (e != cudaSuccess) finish("runtime_error", cuda_msg("after the entry", e), 3);
}

// ------------------------------------------------------------------------------------------------
// Device

struct DeviceFacts {
  int sm_count = 0;
  int l2_bytes = 0;
};

inline DeviceFacts setup_device() {
  g_state.gpu_used = true;
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (g_state.opt.device >= n)
    finish("bad_args", "--device " + std::to_string(g_state.opt.device) + " but " + std::to_string(n) + " device(s)", 2);
  check(cudaSetDevice((int)g_state.opt.device), "cudaSetDevice");
  cudaDeviceProp p;
  check(cudaGetDeviceProperties(&p, (int)g_state.opt.device), "cudaGetDeviceProperties");
  int clock_khz = 0, mem_clock_khz = 0, bus_width = 0, l2 = 0;
  const int dev = (int)g_state.opt.device;
  bool has_clock = cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev) == cudaSuccess;
  bool has_mem_clock = cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess;
  bool has_bus = cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2 cache size)");
  cudaGetLastError();
  int drv = 0, rt = 0;
  check(cudaDriverGetVersion(&drv), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&rt), "cudaRuntimeGetVersion");
  char uuid[64];
  const unsigned char* u = (const unsigned char*)p.uuid.bytes;
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  char pci[32];
  std::snprintf(pci, sizeof pci, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  std::string j = "{";
  j += "\"index\": " + std::to_string(dev);
  j += ", \"name\": " + json_str(p.name);
  j += ", \"cc\": " + json_str(std::to_string(p.major) + "." + std::to_string(p.minor));
  j += ", \"sm_count\": " + std::to_string(p.multiProcessorCount);
  j += ", \"l2_bytes\": " + std::to_string(l2);
  j += ", \"persisting_l2_max_bytes\": " + std::to_string(p.persistingL2CacheMaxSize);
  j += ", \"total_mem_bytes\": " + json_u64((u64)p.totalGlobalMem);
  j += ", \"clock_khz\": " + (has_clock ? std::to_string(clock_khz) : std::string("null"));
  j += ", \"mem_clock_khz\": " + (has_mem_clock ? std::to_string(mem_clock_khz) : std::string("null"));
  j += ", \"mem_bus_width\": " + (has_bus ? std::to_string(bus_width) : std::string("null"));
  j += ", \"ecc\": " + std::string(p.ECCEnabled ? "true" : "false");
  j += ", \"uuid\": " + json_str(uuid);
  j += ", \"pci_bus_id\": " + json_str(pci);
  j += ", \"driver_version\": " + std::to_string(drv);
  j += ", \"runtime_version\": " + std::to_string(rt);
  j += "}";
  g_state.device_json = j;
  // Persisting L2 off: a persisting window left by anyone would survive the flush (pitfall 15).
  cudaError_t e = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  if (e == cudaSuccess) {
    g_state.persisting_set = true;
  } else {
    g_state.has_persisting_error = true;
    g_state.persisting_error = cuda_msg("cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0)", e);
    cudaGetLastError();
  }
  e = cudaCtxResetPersistingL2Cache();
  if (e != cudaSuccess) {
    if (g_state.has_persisting_error) g_state.persisting_error += "; ";
    g_state.has_persisting_error = true;
    g_state.persisting_error += cuda_msg("cudaCtxResetPersistingL2Cache", e);
    cudaGetLastError();
  }
  cudaFuncAttributes fa;
  std::memset(&fa, 0, sizeof fa);
  if (entry_attributes(&fa)) {
    std::string a = "{";
    a += "\"num_regs\": " + std::to_string(fa.numRegs);
    a += ", \"local_bytes\": " + json_u64((u64)fa.localSizeBytes);
    a += ", \"shared_static_bytes\": " + json_u64((u64)fa.sharedSizeBytes);
    a += ", \"const_bytes\": " + json_u64((u64)fa.constSizeBytes);
    a += ", \"max_threads_per_block\": " + std::to_string(fa.maxThreadsPerBlock);
    a += ", \"max_dynamic_shared_bytes\": " + std::to_string(fa.maxDynamicSharedSizeBytes);
    a += ", \"ptx_version\": " + std::to_string(fa.ptxVersion);
    a += ", \"binary_version\": " + std::to_string(fa.binaryVersion);
    a += "}";
    g_state.attrs_json = a;
    g_state.entry_static_smem = (u64)fa.sharedSizeBytes;
    g_state.entry_is_kernel = true;
  }
  DeviceFacts f;
  f.sm_count = p.multiProcessorCount > 0 ? p.multiProcessorCount : 1;
  g_state.sm_count = f.sm_count;
  f.l2_bytes = l2;
  return f;
}

inline std::vector<void*> arg_pointers() {
  std::vector<void*> ptrs((std::size_t)kNumArgs, nullptr);
  for (Buffer& b : g_state.bufs) ptrs[(std::size_t)b.arg] = b.dev;
  return ptrs;
}

// ------------------------------------------------------------------------------------------------
// Modes

// One launch per input set (--sets; one set, --seed, without it), each prepared afresh: inputs filled
// (host) or drawn (device, @LAUNCH sets), outputs poisoned, shared memory poisoned. Set 0's outputs go to
// the buffers' plain files and the legacy per-buffer fields; set i's to <stem>.s<i>.bin. An in buffer is
// "mutated" in a set when its device digest after the launch differs from the one before it.
inline void mode_check(const DeviceFacts& f) {
  std::vector<void*> ptrs = arg_pointers();
  entry_prepare_checked();
  bool dists_uploaded = false;
  std::vector<unsigned char> host;
  std::vector<u64> before(g_state.bufs.size(), 0);
  for (std::size_t i = 0; i < g_state.sets.size(); ++i) {
    const SetSpec& ss = g_state.sets[i];
    SetResult& r = g_state.set_results[i];
    if (ss.has_launch) {
      HostPhase ph("fill_inputs_device");
      if (!dists_uploaded) upload_fresh_dists();
      dists_uploaded = true;
      fill_device_inputs(launch_seed(ss.seed, ss.launch), ss.abs, f.sm_count);
    } else if (i > 0) {
      {
        HostPhase ph("fill_inputs");
        fill_host_set(i, &r);  // set 0 was filled and uploaded before the device was set up
      }
      HostPhase ph("upload");
      upload_inputs();
    }
    {
      HostPhase ph("digest");
      for (std::size_t k = 0; k < g_state.bufs.size(); ++k) {
        const Buffer& b = g_state.bufs[k];
        u64 same = 0;
        if (kArgs[b.arg].dir == DIR_IN) device_digest(b.dev, b.count, b.esize, 0, &before[k], &same);
      }
    }
    {
      HostPhase ph("poison");
      if (ss.prefill == PREFILL_POISON || ss.prefill == PREFILL_COVERAGE) poison_outputs();
      if (ss.prefill == PREFILL_GARBAGE) shift_outputs(ss.seed, host);
      if (ss.prefill == PREFILL_COVERAGE) poison_inouts();
      poison_shared_memory();
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the entry");
    }
    {
      HostPhase ph("launch");
      const auto t0 = std::chrono::steady_clock::now();
      launch_checked(ptrs.data());
      sync_checked();
      r.launch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    for (std::size_t k = 0; k < g_state.bufs.size(); ++k) {
      Buffer& b = g_state.bufs[k];
      const ArgInfo& a = kArgs[b.arg];
      SetBuf& sb = r.bufs[k];
      if (a.dir == DIR_IN) {
        u64 after = 0, same = 0;
        device_digest(b.dev, b.count, b.esize, 0, &after, &same);
        sb.mutated = after != before[k];
        sb.has_mutated = true;
        if (i == 0 && b.has_hash_before) {  // the legacy field: FNV-1a of the bytes read back
          host.assign(b.bytes, 0);
          check(cudaMemcpy(host.data(), b.dev, b.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(read back)");
          b.hash_after = fnv1a64(host.data(), b.bytes);
          b.has_hash_after = true;
        }
        continue;
      }
      {
        HostPhase ph("readback");
        host.assign(b.bytes, 0);
        check(cudaMemcpy(host.data(), b.dev, b.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(read back)");
      }
      {
        HostPhase ph("digest");
        digest_host(host.data(), b.count, b.esize, b.poison, &sb.digest, &sb.unwritten);
      }
      sb.has_digest = true;
      sb.file = i == 0 ? std::string(a.file) : file_variant(a.file, ".bin", "s" + std::to_string(i));
      std::string err;
      HostPhase ph("write_outputs");
      check_io(write_file(path_in_out(sb.file.c_str()), host.data(), b.bytes, &err), err);
      if (i == 0) {
        b.digest = sb.digest;
        b.unwritten = sb.unwritten;
        b.has_digest = true;
        b.wrote_file = true;
      }
    }
    check_guards();
  }
}

inline void mode_profile(const DeviceFacts&) {
  std::vector<void*> ptrs = arg_pointers();
  entry_prepare_checked();
  // One warm-up launch, then the launch ncu captures: kernellsp runs ncu with --profile-from-start off,
  // so only what runs between cudaProfilerStart and cudaProfilerStop is profiled (every kernel a host
  // launcher starts, exactly once; never the warm-up).
  for (int k = 0; k < 2; ++k) {
    prepare_launch(false, 0, 1);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the entry");
    if (k == 1) check(cudaProfilerStart(), "cudaProfilerStart");
    launch_checked(ptrs.data());
    sync_checked();
    if (k == 1) check(cudaProfilerStop(), "cudaProfilerStop");
  }
}

inline void mode_time(const DeviceFacts& f) {
  const Options& o = g_state.opt;
  const bool kernel = std::strcmp(kEntryKind, "global") == 0;
  std::vector<void*> ptrs = arg_pointers();
  entry_prepare_checked();
  if (o.fresh_inputs) upload_fresh_dists();
  void* flush = nullptr;
  u64 flush_bytes = f.l2_bytes > 0 ? 2ULL * (u64)f.l2_bytes : 0ULL;
  if (flush_bytes) check(cudaMalloc(&flush, (std::size_t)flush_bytes), "cudaMalloc(L2 flush buffer)");
  g_state.l2_flush_bytes = flush_bytes;
  if (flush) g_state.copy_bw = probe_copy_bandwidth(flush, flush_bytes);
  // --check-launches M: a uniform random sample of M timed launches (reservoir sampling), each decided
  // only after that launch has run, with entropy the seed does not give: the entry cannot know which of
  // its launches will be compared with the reference, so every timed launch must do the work.
  const long keep = o.check_launches;
  u64 pick = os_entropy();
  g_state.snapshots.assign((std::size_t)std::min<long>(keep, o.reps), Snapshot());
  cudaEvent_t start, stop, stop_sync;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventCreate(&stop_sync), "cudaEventCreate");
  const long total = o.warmup + o.reps;
  for (long k = 0; k < total; ++k) {
    const bool timed = k >= o.warmup;
    // Untimed: poison / restore, flush L2 by writing 2x its size, then poison shared memory last: the
    // poison kernels touch no global memory (the L2 stays cold), and no other kernel runs between them
    // and the entry (another kernel's shared memory configuration would replace what they wrote).
    prepare_launch(o.fresh_inputs, (u64)k, f.sm_count);
    if (flush) check(cudaMemsetAsync(flush, (int)(k & 0xff), (std::size_t)flush_bytes, 0), "cudaMemsetAsync(L2 flush)");
    poison_shared_memory();
    // Host launchers may do host work before they launch: start from an idle device. Kernels are
    // queued behind the flush so that the interval holds no host launch latency.
    if (!kernel) check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the entry");
    check(cudaEventRecord(start, 0), "cudaEventRecord(start)");
    launch_checked(ptrs.data());
    check(cudaEventRecord(stop, 0), "cudaEventRecord(stop)");
    sync_checked();  // everything the entry started, on any stream, is done before the end is read
    check(cudaEventRecord(stop_sync, 0), "cudaEventRecord(stop_sync)");
    check(cudaEventSynchronize(stop_sync), "cudaEventSynchronize(stop_sync)");
    if (!timed) continue;
    float ms = 0.0f, ms_sync = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    check(cudaEventElapsedTime(&ms_sync, start, stop_sync), "cudaEventElapsedTime");
    g_state.timings.push_back((double)ms);
    g_state.timings_sync.push_back((double)ms_sync);
    // Untimed: digest of every output after this launch (lazy or skipped work shows up here).
    for (Buffer& b : g_state.bufs) {
      if (kArgs[b.arg].dir == DIR_IN) continue;
      u64 digest = 0, unwritten = 0;
      device_digest(b.dev, b.count, b.esize, b.poison, &digest, &unwritten);
      b.rep_digests.push_back(digest);
      b.rep_unwritten.push_back(unwritten);
    }
    check_guards();
    // Untimed: keep this launch's outputs if the sample takes it (decided now that it has run).
    const long t = k - o.warmup;
    long slot = -1;
    if (t < (long)g_state.snapshots.size()) {
      slot = t;
    } else if (!g_state.snapshots.empty()) {
      pick = mix64(pick + kGamma);
      const long r = (long)bounded(pick, (u64)t + 1);
      if (r < (long)g_state.snapshots.size()) slot = r;
    }
    if (slot >= 0) {
      // A device-to-device copy into the slot (a reservoir replaces slots several times per run: copying
      // 256 MB outputs to fresh host vectors each time cost a second per run); host memory when the
      // device has no room for the slots.
      Snapshot& sn = g_state.snapshots[(std::size_t)slot];
      sn.launch = k;
      std::size_t n = 0;
      for (Buffer& b : g_state.bufs) {
        if (kArgs[b.arg].dir == DIR_IN) continue;
        if (sn.dev.size() <= n) {
          void* p = nullptr;
          if (cudaMalloc(&p, b.bytes) != cudaSuccess) {
            (void)cudaGetLastError();  // out of memory is not sticky: clear it and keep the slot on the host
            p = nullptr;
          }
          sn.dev.push_back(p);
          sn.bytes.push_back(b.bytes);
          sn.data.emplace_back();
        }
        if (sn.dev[n] != nullptr) {
          check(cudaMemcpy(sn.dev[n], b.dev, b.bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy(snapshot)");
        } else {
          sn.data[n].resize(b.bytes);
          check(cudaMemcpy(sn.data[n].data(), b.dev, b.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(snapshot)");
        }
        ++n;
      }
    }
  }
  for (Snapshot& sn : g_state.snapshots) {
    for (std::size_t n = 0; n < sn.dev.size(); ++n) {
      if (sn.dev[n] == nullptr) continue;
      sn.data[n].resize(sn.bytes[n]);
      check(cudaMemcpy(sn.data[n].data(), sn.dev[n], sn.bytes[n], cudaMemcpyDeviceToHost), "cudaMemcpy(snapshot)");
      check(cudaFree(sn.dev[n]), "cudaFree(snapshot)");
      sn.dev[n] = nullptr;
    }
  }
  std::sort(g_state.snapshots.begin(), g_state.snapshots.end(),
            [](const Snapshot& x, const Snapshot& y) { return x.launch < y.launch; });
  for (std::size_t j = 0; j < g_state.snapshots.size(); ++j) {
    std::size_t k = 0;
    for (Buffer& b : g_state.bufs) {
      const ArgInfo& a = kArgs[b.arg];
      if (a.dir == DIR_IN) continue;
      std::string err;
      const std::vector<unsigned char>& data = g_state.snapshots[j].data[k++];
      check_io(write_file(path_in_out(file_variant(a.file, ".bin", "snap" + std::to_string(j)).c_str()), data.data(),
                          data.size(), &err),
               err);
    }
  }
  std::string err;
  check_io(write_file(path_in_out("timings.bin"), g_state.timings.data(), g_state.timings.size() * sizeof(double), &err),
           err);
  check_io(write_file(path_in_out("timings_sync.bin"), g_state.timings_sync.data(),
                      g_state.timings_sync.size() * sizeof(double), &err),
           err);
  // --dump-last: the outputs of the last timed launch, so the caller can check that later launches
  // still compute the right answer (the inputs of repetition k depend only on the seed and k, so a
  // baseline and a candidate run with the same arguments see the same last inputs).
  if (o.dump_last) {
    std::vector<unsigned char> host;
    for (Buffer& b : g_state.bufs) {
      const ArgInfo& a = kArgs[b.arg];
      if (a.dir == DIR_IN) continue;
      host.assign(b.bytes, 0);
      check(cudaMemcpy(host.data(), b.dev, b.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(read back last)");
      digest_host(host.data(), b.count, b.esize, b.poison, &b.digest, &b.unwritten);
      b.has_digest = true;
      check_io(write_file(path_in_out(a.file), host.data(), b.bytes, &err), err);
      b.wrote_file = true;
    }
  }
}

inline int run(int argc, char** argv) {
  parse_args(argc, argv);
  make_buffers();
  const bool per_set = g_state.opt.mode == "check" || g_state.opt.mode == "inputs";
  if (per_set) {
    g_state.set_results.resize(g_state.sets.size());
    for (std::size_t i = 0; i < g_state.sets.size(); ++i) {
      g_state.set_results[i].spec = g_state.sets[i];
      g_state.set_results[i].bufs.assign(g_state.bufs.size(), SetBuf());
    }
  }
  if (g_state.opt.mode == "inputs") {
    for (std::size_t i = 0; i < g_state.sets.size(); ++i) fill_host_set(i, &g_state.set_results[i]);
    finish("ok", "", 0);
  }
  // Time mode with --fresh-inputs draws every launch's inputs on the device (warm-ups included), so a host
  // fill would only be overwritten (0.6 s for a 64M-element input).
  const bool device_drawn = g_state.opt.mode == "time" && g_state.opt.fresh_inputs && !g_state.opt.dump_inputs;
  if (!g_state.sets[0].has_launch && !device_drawn) {
    HostPhase ph("fill_inputs");
    fill_host_set(0, per_set ? &g_state.set_results[0] : nullptr);
  }
  DeviceFacts f;
  {
    HostPhase ph("device_setup");
    f = setup_device();
  }
  {
    HostPhase ph("allocate");
    allocate_buffers();
  }
  {
    HostPhase ph("upload");
    upload_inputs();
  }
  if (g_state.opt.mode == "check") {
    mode_check(f);
  } else if (g_state.opt.mode == "time") {
    HostPhase ph("time");
    mode_time(f);
  } else {
    HostPhase ph("profile");
    mode_profile(f);
  }
  finish("ok", "", 0);
}

#endif  // KERNELLSP_H_INTERFACE_ONLY

}  // namespace kernellsp_h

#undef KERNELLSP_H_HD
