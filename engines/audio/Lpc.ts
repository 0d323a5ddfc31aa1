/** Linear prediction helpers shared by the whisper renderer and the voice analysis. */

/** Levinson–Durbin: predictor a[0..p] of A(z) (a[0] = 1) from autocorrelation r[0..p]. */
export const levinson = (r: Float64Array, p: number): Float64Array => {
  const a = new Float64Array(p + 1)
  a[0] = 1
  let err = r[0]!
  const tmp = new Float64Array(p + 1)
  for (let i = 1; i <= p && err > 0; i++) {
    let acc = r[i]!
    for (let j = 1; j < i; j++) acc += a[j]! * r[i - j]!
    const k = -acc / err
    tmp.set(a)
    for (let j = 1; j < i; j++) a[j] = tmp[j]! + k * tmp[i - j]!
    a[i] = k
    err *= 1 - k * k
  }
  return a
}
