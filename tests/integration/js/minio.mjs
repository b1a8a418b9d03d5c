// SPDX-License-Identifier: Apache-2.0
// The MinIO JavaScript SDK against railiod's S3 gateway (tests/integration/test_gw_js.c),
// presignedPostPolicy (a POST upload) included; prints "all ok" when every step passed.
// Environment: EP (http://HOST:PORT), AK, SK.
import * as Minio from "minio";
import crypto from "node:crypto";
import fs from "node:fs";
import { Readable } from "node:stream";

const ep = new URL(process.env.EP);
const mc = new Minio.Client({ endPoint: ep.hostname, port: Number(ep.port), useSSL: false, pathStyle: true, region: "us-east-1",
  accessKey: process.env.AK, secretKey: process.env.SK, partSize: 5 * 1024 * 1024 });
const B = "minio-b";
let fails = 0;
async function step(name, fn) {
  try { const r = await fn(); console.log("ok  ", name, r === undefined ? "" : r); }
  catch (e) { fails++; console.log("FAIL", name, e.code, e.message?.slice(0, 300)); }
}
const collect = async (s) => { const out = []; for await (const x of s) out.push(x); return out; };
const buf = async (s) => Buffer.concat(await collect(s));
const small = crypto.randomBytes(70000), big = crypto.randomBytes(17 * 1024 * 1024 + 3);
await step("makeBucket", () => mc.makeBucket(B, "us-east-1"));
await step("bucketExists", () => mc.bucketExists(B));
await step("listBuckets", async () => (await mc.listBuckets()).map(b => b.name).join(","));
await step("putObject small", async () => JSON.stringify(await mc.putObject(B, "a/small", small, small.length, { "Content-Type": "x/t", "X-Amz-Meta-Foo": "bar" })));
await step("putObject big (multipart)", async () => JSON.stringify(await mc.putObject(B, "a/big", big, big.length)));
await step("putObject stream unknown size", async () => JSON.stringify(await mc.putObject(B, "a/stream", Readable.from([big.subarray(0, 7000000), big.subarray(7000000)]))));
await step("statObject", async () => { const s = await mc.statObject(B, "a/small"); return `${s.size} ${s.etag} ${JSON.stringify(s.metaData)}`; });
await step("getObject", async () => { const b = await buf(await mc.getObject(B, "a/big")); if (!b.equals(big)) throw new Error("differ"); });
await step("getObject stream key", async () => { const b = await buf(await mc.getObject(B, "a/stream")); if (!b.equals(big)) throw new Error("differ"); });
await step("getPartialObject", async () => { const b = await buf(await mc.getPartialObject(B, "a/big", 100, 50)); if (!b.equals(big.subarray(100, 150))) throw new Error("differ"); });
await step("fPutObject/fGetObject", async () => { fs.writeFileSync(process.env.DIR + "/f.bin", small); await mc.fPutObject(B, "f/file", process.env.DIR + "/f.bin");
  await mc.fGetObject(B, "f/file", process.env.DIR + "/f2.bin"); if (!fs.readFileSync(process.env.DIR + "/f2.bin").equals(small)) throw new Error("differ"); });
await step("copyObject", async () => { const c = new Minio.CopyConditions(); return JSON.stringify(await mc.copyObject(B, "c/copy", `/${B}/a/small`, c)); });
await step("listObjectsV2 recursive", async () => (await collect(mc.listObjectsV2(B, "", true))).map(o => o.name).join(","));
await step("listObjects delimiter", async () => (await collect(mc.listObjects(B, "", false))).map(o => o.name || o.prefix).join(","));
await step("listObjectsV2WithMetadata", async () => (await collect(mc.extensions.listObjectsV2WithMetadata(B, "", true))).map(o => o.name).join(","));
await step("presignedGetObject", async () => { const u = await mc.presignedGetObject(B, "a/small", 60); const r = await fetch(u);
  const b = Buffer.from(await r.arrayBuffer()); if (!b.equals(small)) throw new Error(`status ${r.status}`); return r.status; });
await step("presignedPutObject", async () => { const u = await mc.presignedPutObject(B, "p/put", 60); const r = await fetch(u, { method: "PUT", body: small });
  if (r.status !== 200) throw new Error(`PUT ${r.status}`); return r.status; });
await step("presignedPostPolicy", async () => { const p = mc.newPostPolicy(); p.setBucket(B); p.setKey("post/obj"); p.setExpires(new Date(Date.now() + 60000));
  const { postURL, formData } = await mc.presignedPostPolicy(p); const fd = new FormData(); for (const [k, v] of Object.entries(formData)) fd.append(k, v);
  fd.append("file", new Blob([small])); const r = await fetch(postURL, { method: "POST", body: fd });
  if (r.status !== 204) throw new Error(`POST ${r.status} ${(await r.text()).slice(0, 160)}`);
  const b = await buf(await mc.getObject(B, "post/obj")); if (!b.equals(small)) throw new Error("POSTed bytes differ"); return r.status; });
await step("listIncompleteUploads", async () => (await collect(mc.listIncompleteUploads(B, "", true))).length);
await step("removeObjects", async () => { const names = (await collect(mc.listObjectsV2(B, "", true))).map(o => o.name); await mc.removeObjects(B, names); return names.length; });
await step("removeObject", () => mc.removeObject(B, "nope"));
await step("getBucketVersioning", async () => JSON.stringify(await mc.getBucketVersioning(B)));
await step("removeBucket", () => mc.removeBucket(B));
console.log(fails ? `${fails} failed` : "all ok");
process.exit(fails ? 1 : 0);
