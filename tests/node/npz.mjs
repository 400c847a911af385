// npz.mjs — a minimal reader of stored (uncompressed) .npz files, as `vitlens explain
// --save-stages` and the page write them: the zip's central directory, each member's local header,
// and the .npy inside (support.mjs's readNpy). Not a general zip reader: no compression, no ZIP64.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { readNpy, tmpDir } from './support.mjs';

// { name: { shape, data: Float32Array } } from the bytes of a stored (uncompressed) .npz.
export function readNpz(bytes) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.length - 22;
  assert.equal(dv.getUint32(end, true), 0x06054b50);
  const count = dv.getUint16(end + 10, true);
  let p = dv.getUint32(end + 16, true);
  const out = {};
  for (let k = 0; k < count; k++) {
    assert.equal(dv.getUint32(p, true), 0x02014b50);
    assert.equal(dv.getUint16(p + 10, true), 0, 'stored');
    const size = dv.getUint32(p + 20, true);
    const nameLen = dv.getUint16(p + 28, true);
    const local = dv.getUint32(p + 42, true);
    const name = Buffer.from(bytes.subarray(p + 46, p + 46 + nameLen)).toString('latin1');
    const start = local + 30 + dv.getUint16(local + 26, true) + dv.getUint16(local + 28, true);
    const file = path.join(tmpDir(), 'member.npy');
    fs.writeFileSync(file, bytes.subarray(start, start + size));
    const { shape, data } = readNpy(file);
    fs.rmSync(path.dirname(file), { recursive: true });
    out[name.replace(/\.npy$/, '')] = { shape, data: new Float32Array(data) };
    p += 46 + nameLen + dv.getUint16(p + 30, true) + dv.getUint16(p + 32, true);
  }
  return out;
}

