// SPDX-License-Identifier: Apache-2.0
// The AWS SDK for JavaScript v3 against railiod's S3 gateway (tests/integration/test_gw_js.c):
// every call a Node.js application makes, each answer checked; prints "all ok" when every
// step passed. Environment: EP (http://HOST:PORT), AK, SK, BUCKET.
import { S3Client, CreateBucketCommand, HeadBucketCommand, ListBucketsCommand,
  PutObjectCommand, GetObjectCommand, HeadObjectCommand, CopyObjectCommand,
  DeleteObjectCommand, DeleteObjectsCommand, ListObjectsV2Command, ListObjectsCommand,
  CreateMultipartUploadCommand, UploadPartCommand, CompleteMultipartUploadCommand,
  AbortMultipartUploadCommand, ListPartsCommand, ListMultipartUploadsCommand,
  DeleteBucketCommand, GetObjectAttributesCommand, UploadPartCopyCommand,
  paginateListObjectsV2, GetBucketLocationCommand, GetBucketVersioningCommand,
  GetObjectTaggingCommand, PutObjectTaggingCommand, DeleteObjectTaggingCommand,
  PutBucketCorsCommand, GetBucketCorsCommand } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import crypto from "node:crypto";
import { Readable } from "node:stream";

const ep = process.env.EP;
const s3 = new S3Client({ endpoint: ep, region: "us-east-1", forcePathStyle: true,
  credentials: { accessKeyId: process.env.AK, secretAccessKey: process.env.SK } });
const B = process.env.BUCKET;
let fails = 0;
async function step(name, fn) {
  try { const r = await fn(); console.log("ok  ", name, r === undefined ? "" : r); }
  catch (e) { fails++; console.log("FAIL", name, e.name, e.$metadata?.httpStatusCode, e.message?.slice(0, 300)); }
}
async function expectErr(name, code, fn) {
  try { await fn(); fails++; console.log("FAIL", name, "no error, wanted", code); }
  catch (e) { if (e.name === code || e.Code === code) console.log("ok  ", name, code, e.$metadata?.httpStatusCode);
    else { fails++; console.log("FAIL", name, "got", e.name, e.$metadata?.httpStatusCode, e.message?.slice(0, 200), "wanted", code); } }
}
const body = async (r) => Buffer.from(await r.Body.transformToByteArray());
const rnd = (n) => crypto.randomBytes(n);
const md5 = (b) => crypto.createHash("md5").update(b).digest("hex");

await step("CreateBucket", () => s3.send(new CreateBucketCommand({ Bucket: B })).then(() => undefined));
await step("HeadBucket", () => s3.send(new HeadBucketCommand({ Bucket: B })).then(r => r.$metadata.httpStatusCode));
await step("GetBucketLocation", () => s3.send(new GetBucketLocationCommand({ Bucket: B })).then(r => r.LocationConstraint));
await step("GetBucketVersioning", () => s3.send(new GetBucketVersioningCommand({ Bucket: B })).then(r => JSON.stringify(r.Status)));
await step("ListBuckets", () => s3.send(new ListBucketsCommand({})).then(r => r.Buckets.map(b => b.Name).join(",")));
const small = rnd(100000);
await step("PutObject (default checksum)", () => s3.send(new PutObjectCommand({ Bucket: B, Key: "a/small.bin", Body: small,
  ContentType: "application/x-test", Metadata: { color: "blue", "Mixed-Case": "Yes" } })).then(r => `${r.ETag} crc32=${r.ChecksumCRC32}`));
await step("GetObject ChecksumMode", async () => { const r = await s3.send(new GetObjectCommand({ Bucket: B, Key: "a/small.bin", ChecksumMode: "ENABLED" }));
  const b = await body(r); if (!b.equals(small)) throw new Error("bytes differ"); return `${r.ContentType} ${JSON.stringify(r.Metadata)} crc32=${r.ChecksumCRC32}`; });
for (const alg of ["CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"]) {
  await step(`PutObject ${alg}`, () => s3.send(new PutObjectCommand({ Bucket: B, Key: `c/${alg}`, Body: small, ChecksumAlgorithm: alg }))
    .then(r => `${r.ETag} ${r["Checksum" + alg]}`));
  await step(`GetObject ${alg} back`, async () => { const r = await s3.send(new GetObjectCommand({ Bucket: B, Key: `c/${alg}`, ChecksumMode: "ENABLED" }));
    const b = await body(r); if (!b.equals(small)) throw new Error("bytes differ"); return `${r["Checksum" + alg]} type=${r.ChecksumType}`; });
}
await step("PutObject stream unknown length", async () => {
  const data = rnd(3 * 1024 * 1024 + 7);
  const r = await new Upload({ client: s3, params: { Bucket: B, Key: "s/stream.bin", Body: Readable.from([data.subarray(0, 1000), data.subarray(1000)]) } }).done();
  const g = await body(await s3.send(new GetObjectCommand({ Bucket: B, Key: "s/stream.bin" })));
  if (!g.equals(data)) throw new Error("bytes differ"); return r.ETag; });
const big = rnd(23 * 1024 * 1024 + 5);
await step("lib-storage multipart 23 MiB", async () => {
  const r = await new Upload({ client: s3, queueSize: 3, partSize: 5 * 1024 * 1024, params: { Bucket: B, Key: "m/big.bin", Body: big, ContentType: "x/y" } }).done();
  const g = await body(await s3.send(new GetObjectCommand({ Bucket: B, Key: "m/big.bin", ChecksumMode: "ENABLED" })));
  if (!g.equals(big)) throw new Error("bytes differ"); return r.ETag; });
await step("lib-storage multipart stream", async () => {
  const r = await new Upload({ client: s3, partSize: 5 * 1024 * 1024, params: { Bucket: B, Key: "m/bigs.bin", Body: Readable.from([big]) } }).done();
  const g = await body(await s3.send(new GetObjectCommand({ Bucket: B, Key: "m/bigs.bin" })));
  if (!g.equals(big)) throw new Error("bytes differ"); return r.ETag; });
await step("lib-storage multipart with tags", async () => {
  // Upload puts the tags with PutObjectTagging once the object is complete
  await new Upload({ client: s3, partSize: 5 * 1024 * 1024, tags: [{ Key: "team", Value: "ml" }, { Key: "tier", Value: "hot" }],
    params: { Bucket: B, Key: "m/tagged.bin", Body: big } }).done();
  const t = await s3.send(new GetObjectTaggingCommand({ Bucket: B, Key: "m/tagged.bin" }));
  const h = await s3.send(new GetObjectCommand({ Bucket: B, Key: "m/tagged.bin", Range: "bytes=0-0" }));
  if (JSON.stringify(t.TagSet) !== '[{"Key":"team","Value":"ml"},{"Key":"tier","Value":"hot"}]' || h.TagCount !== 2)
    throw new Error(`tags ${JSON.stringify(t.TagSet)} count ${h.TagCount}`);
  return JSON.stringify(t.TagSet); });
await step("PutObject Tagging, PutObjectTagging, DeleteObjectTagging", async () => {
  await s3.send(new PutObjectCommand({ Bucket: B, Key: "t/x", Body: "x", Tagging: "a=1&b=two%20words" }));
  const a = await s3.send(new GetObjectTaggingCommand({ Bucket: B, Key: "t/x" }));
  await s3.send(new PutObjectTaggingCommand({ Bucket: B, Key: "t/x", Tagging: { TagSet: [{ Key: "c", Value: "3" }] } }));
  const b = await s3.send(new GetObjectTaggingCommand({ Bucket: B, Key: "t/x" }));
  await s3.send(new DeleteObjectTaggingCommand({ Bucket: B, Key: "t/x" }));
  const c = await s3.send(new GetObjectTaggingCommand({ Bucket: B, Key: "t/x" }));
  const got = [a, b, c].map(r => JSON.stringify(r.TagSet)).join(" ");
  if (got !== '[{"Key":"a","Value":"1"},{"Key":"b","Value":"two words"}] [{"Key":"c","Value":"3"}] []')
    throw new Error(got);
  return got; });
await expectErr("PutObjectTagging aws: prefix", "InvalidTag", () => s3.send(new PutObjectTaggingCommand({ Bucket: B, Key: "t/x",
  Tagging: { TagSet: [{ Key: "aws:x", Value: "1" }] } })));
await step("PutBucketCors, GetBucketCors", async () => {
  const rules = [{ AllowedOrigins: ["https://app.test"], AllowedMethods: ["GET", "PUT"], AllowedHeaders: ["*"], ExposeHeaders: ["ETag"], MaxAgeSeconds: 60 }];
  await s3.send(new PutBucketCorsCommand({ Bucket: B, CORSConfiguration: { CORSRules: rules } }));
  const r = await s3.send(new GetBucketCorsCommand({ Bucket: B }));
  const pre = await fetch(`${ep}/${B}/t/x`, { method: "OPTIONS", headers: { Origin: "https://app.test", "Access-Control-Request-Method": "PUT" } });
  const g = r.CORSRules[0], want = rules[0];
  if (r.CORSRules.length !== 1 || ["AllowedOrigins", "AllowedMethods", "AllowedHeaders", "ExposeHeaders", "MaxAgeSeconds"]
        .some(f => JSON.stringify(g[f]) !== JSON.stringify(want[f])) ||
      pre.status !== 200 || pre.headers.get("access-control-allow-origin") !== "https://app.test")
    throw new Error(`${JSON.stringify(r.CORSRules)} ${pre.status}`);
  return pre.status; });
await step("HeadObject big with checksum", () => s3.send(new HeadObjectCommand({ Bucket: B, Key: "m/big.bin", ChecksumMode: "ENABLED" }))
  .then(r => `${r.ContentLength} ${r.ETag} ${r.ContentType} crc32=${r.ChecksumCRC32} type=${r.ChecksumType} parts=${r.PartsCount}`));
await step("HeadObject PartNumber", () => s3.send(new HeadObjectCommand({ Bucket: B, Key: "m/big.bin", PartNumber: 2 }))
  .then(r => `${r.ContentLength} ${r.PartsCount} ${r.ContentRange}`));
await step("GetObject Range", async () => { const r = await s3.send(new GetObjectCommand({ Bucket: B, Key: "m/big.bin", Range: "bytes=5242870-5242889" }));
  const b = await body(r); if (!b.equals(big.subarray(5242870, 5242890))) throw new Error("range differs"); return r.ContentRange; });
await step("GetObject suffix range", async () => { const r = await s3.send(new GetObjectCommand({ Bucket: B, Key: "m/big.bin", Range: "bytes=-10" }));
  const b = await body(r); if (!b.equals(big.subarray(big.length - 10))) throw new Error("range differs"); return r.ContentRange; });
await expectErr("GetObject bad range", "InvalidRange", () => s3.send(new GetObjectCommand({ Bucket: B, Key: "a/small.bin", Range: "bytes=200000-" })));
const h = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "a/small.bin" }));
await expectErr("GetObject IfMatch wrong", "PreconditionFailed", () => s3.send(new GetObjectCommand({ Bucket: B, Key: "a/small.bin", IfMatch: '"0000"' })));
await step("GetObject IfNoneMatch same -> 304", async () => { try { await s3.send(new GetObjectCommand({ Bucket: B, Key: "a/small.bin", IfNoneMatch: h.ETag })); throw new Error("no 304"); }
  catch (e) { if (e.$metadata?.httpStatusCode !== 304) throw e; return "304 " + e.name; } });
await step("GetObject IfModifiedSince future -> 304", async () => { try { await s3.send(new GetObjectCommand({ Bucket: B, Key: "a/small.bin", IfModifiedSince: new Date(Date.now() + 86400e3) })); throw new Error("no 304"); }
  catch (e) { if (e.$metadata?.httpStatusCode !== 304) throw e; return "304"; } });
await expectErr("GetObject IfUnmodifiedSince past", "PreconditionFailed", () => s3.send(new GetObjectCommand({ Bucket: B, Key: "a/small.bin", IfUnmodifiedSince: new Date(Date.now() - 86400e3 * 365) })));
await expectErr("PutObject IfNoneMatch * existing", "PreconditionFailed", () => s3.send(new PutObjectCommand({ Bucket: B, Key: "a/small.bin", Body: "x", IfNoneMatch: "*" })));
await step("PutObject IfNoneMatch * new", () => s3.send(new PutObjectCommand({ Bucket: B, Key: "a/new.txt", Body: "hello", IfNoneMatch: "*" })).then(r => r.ETag));
await step("PutObject IfMatch current", () => s3.send(new PutObjectCommand({ Bucket: B, Key: "a/new.txt", Body: "hello2", IfMatch: `"${md5("hello")}"` })).then(r => r.ETag));
await expectErr("GetObject missing", "NoSuchKey", () => s3.send(new GetObjectCommand({ Bucket: B, Key: "nope" })));
await expectErr("HeadObject missing", "NotFound", () => s3.send(new HeadObjectCommand({ Bucket: B, Key: "nope" })));
await expectErr("GetObject no bucket", "NoSuchBucket", () => s3.send(new GetObjectCommand({ Bucket: "nobucket", Key: "k" })));
await step("CopyObject", () => s3.send(new CopyObjectCommand({ Bucket: B, Key: "copy/small.bin", CopySource: `${B}/a/small.bin` })).then(r => r.CopyObjectResult.ETag));
await step("CopyObject REPLACE metadata", async () => { await s3.send(new CopyObjectCommand({ Bucket: B, Key: "copy/small2.bin", CopySource: `${B}/a/small.bin`, MetadataDirective: "REPLACE", Metadata: { k: "v" }, ContentType: "text/x" }));
  const r = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "copy/small2.bin" })); return `${r.ContentType} ${JSON.stringify(r.Metadata)}`; });
await step("CopyObject key with spaces+unicode", async () => {
  await s3.send(new PutObjectCommand({ Bucket: B, Key: "sp ace/ü+&=?.bin", Body: "uni" }));
  await s3.send(new CopyObjectCommand({ Bucket: B, Key: "copy/ü x", CopySource: encodeURI(`${B}/sp ace/ü+&=?.bin`).replace(/\+/g, "%2B").replace(/&/g, "%26").replace(/=/g, "%3D").replace(/\?/g, "%3F") }));
  return (await body(await s3.send(new GetObjectCommand({ Bucket: B, Key: "copy/ü x" })))).toString(); });
await step("multipart by hand + ListParts + UploadPartCopy", async () => {
  const c = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "mp/hand", ChecksumAlgorithm: "CRC32" }));
  const p1 = big.subarray(0, 5 * 1024 * 1024), p2 = big.subarray(5 * 1024 * 1024, 6 * 1024 * 1024);
  const u1 = await s3.send(new UploadPartCommand({ Bucket: B, Key: "mp/hand", UploadId: c.UploadId, PartNumber: 1, Body: p1, ChecksumAlgorithm: "CRC32" }));
  const u2 = await s3.send(new UploadPartCopyCommand({ Bucket: B, Key: "mp/hand", UploadId: c.UploadId, PartNumber: 2, CopySource: `${B}/m/big.bin`, CopySourceRange: `bytes=${5 * 1024 * 1024}-${6 * 1024 * 1024 - 1}` }));
  const lp = await s3.send(new ListPartsCommand({ Bucket: B, Key: "mp/hand", UploadId: c.UploadId }));
  const lu = await s3.send(new ListMultipartUploadsCommand({ Bucket: B }));
  const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: B, Key: "mp/hand", UploadId: c.UploadId,
    MultipartUpload: { Parts: [{ PartNumber: 1, ETag: u1.ETag, ChecksumCRC32: u1.ChecksumCRC32 }, { PartNumber: 2, ETag: u2.CopyPartResult.ETag, ChecksumCRC32: u2.CopyPartResult.ChecksumCRC32 }] } }));
  const g = await body(await s3.send(new GetObjectCommand({ Bucket: B, Key: "mp/hand" })));
  if (!g.equals(Buffer.concat([p1, p2]))) throw new Error("bytes differ");
  return `parts=${lp.Parts.length} uploads=${lu.Uploads?.length} etag=${done.ETag} crc=${done.ChecksumCRC32} type=${done.ChecksumType}`; });
await step("Abort", async () => { const c = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "mp/ab" }));
  await s3.send(new UploadPartCommand({ Bucket: B, Key: "mp/ab", UploadId: c.UploadId, PartNumber: 1, Body: "abc" }));
  await s3.send(new AbortMultipartUploadCommand({ Bucket: B, Key: "mp/ab", UploadId: c.UploadId })); });
await expectErr("ListParts after abort", "NoSuchUpload", async () => { const lu = await s3.send(new ListMultipartUploadsCommand({ Bucket: B, Prefix: "mp/ab" }));
  await s3.send(new ListPartsCommand({ Bucket: B, Key: "mp/ab", UploadId: "bogus-upload-id" })); });
for (let i = 0; i < 25; i++) await s3.send(new PutObjectCommand({ Bucket: B, Key: `p/d${i % 3}/k${String(i).padStart(2, "0")}`, Body: `v${i}` }));
await step("paginate ListObjectsV2 max 4", async () => { let n = 0, pages = 0; for await (const p of paginateListObjectsV2({ client: s3, pageSize: 4 }, { Bucket: B, Prefix: "p/" })) { pages++; n += p.KeyCount; } return `keys=${n} pages=${pages}`; });
await step("ListObjectsV2 delimiter", () => s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "p/", Delimiter: "/" })).then(r => r.CommonPrefixes.map(c => c.Prefix).join(",")));
await step("ListObjectsV2 StartAfter+FetchOwner", () => s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "p/", StartAfter: "p/d2/k20", FetchOwner: true })).then(r => r.Contents.map(c => c.Key + ":" + (c.Owner?.ID ?? "-") + ":" + c.ChecksumAlgorithm).join(",")));
await step("ListObjects v1 marker", () => s3.send(new ListObjectsCommand({ Bucket: B, Prefix: "p/", MaxKeys: 5, Marker: "p/d1" })).then(r => `${r.Contents.length} trunc=${r.IsTruncated} next=${r.NextMarker}`));
await step("ListObjectsV2 EncodingType url", () => s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "sp", EncodingType: "url" })).then(r => r.Contents.map(c => c.Key).join(",")));
await step("GetObjectAttributes", () => s3.send(new GetObjectAttributesCommand({ Bucket: B, Key: "a/small.bin", ObjectAttributes: ["ETag", "ObjectSize", "Checksum"] })).then(r => JSON.stringify({ e: r.ETag, s: r.ObjectSize })));
await step("presigned GET", async () => { const u = await getSignedUrl(s3, new GetObjectCommand({ Bucket: B, Key: "a/small.bin" }), { expiresIn: 60 });
  const r = await fetch(u); const b = Buffer.from(await r.arrayBuffer()); if (!b.equals(small)) throw new Error(`status ${r.status} ${b.toString().slice(0, 200)}`); return r.status; });
await step("presigned PUT", async () => { const u = await getSignedUrl(s3, new PutObjectCommand({ Bucket: B, Key: "pre/put.bin" }), { expiresIn: 60 });
  const r = await fetch(u, { method: "PUT", body: small }); if (r.status !== 200) throw new Error(`status ${r.status} ${await r.text()}`);
  const g = await body(await s3.send(new GetObjectCommand({ Bucket: B, Key: "pre/put.bin" }))); if (!g.equals(small)) throw new Error("bytes differ"); return r.status; });
await step("DeleteObjects", async () => { const l = await s3.send(new ListObjectsV2Command({ Bucket: B }));
  const r = await s3.send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: l.Contents.map(c => ({ Key: c.Key })) } }));
  return `deleted=${r.Deleted?.length} errors=${r.Errors?.length ?? 0}`; });
await step("DeleteObject missing (204)", () => s3.send(new DeleteObjectCommand({ Bucket: B, Key: "nope" })).then(r => r.$metadata.httpStatusCode));
await step("DeleteBucket", async () => { const lu = await s3.send(new ListMultipartUploadsCommand({ Bucket: B }));
  for (const u of lu.Uploads ?? []) await s3.send(new AbortMultipartUploadCommand({ Bucket: B, Key: u.Key, UploadId: u.UploadId }));
  return s3.send(new DeleteBucketCommand({ Bucket: B })).then(r => r.$metadata.httpStatusCode); });
console.log(fails ? `${fails} failed` : "all ok");
process.exit(fails ? 1 : 0);
