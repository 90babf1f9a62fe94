// The official openai SDK against a running `bicache serve` (BICACHE_URL=http://host:port).
// Checks what SDK users rely on: typed responses, streaming through the SDK's SSE parser, and
// validation errors surfacing as 4xx APIError subclasses (never retried: maxRetries 0 would hide
// a 5xx anyway, so the status is asserted directly).
import assert from "node:assert/strict";
import OpenAI from "openai";

const base = process.env.BICACHE_URL;
assert.ok(base, "BICACHE_URL is required");
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120_000 });

let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed = 1;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}

await check("models.list", async () => {
  const page = await client.models.list();
  assert.ok(page.data.length === 1 && typeof page.data[0].id === "string");
});

await check("completions.create", async () => {
  const r = await client.completions.create({ model: "m", prompt: "Hello", max_tokens: 8, seed: 1 });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
});

await check("chat.completions.create", async () => {
  const r = await client.chat.completions.create({
    model: "m",
    messages: [{ role: "system", content: "Shared." }, { role: "user", content: "Hi?" }],
    max_tokens: 8,
  });
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
});

await check("chat stream equals the non-streamed text", async () => {
  const body = { model: "m", messages: [{ role: "user", content: "Count." }], max_tokens: 16, seed: 5, temperature: 0.7 };
  const whole = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, ids = new Set(), usage = null;
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(ids.size, 1);
  assert.ok(["stop", "length"].includes(finish));
  assert.equal(text, whole.choices[0].message.content);
  assert.ok(usage && usage.total_tokens > 0);
});

await check("stop through the SDK, streamed and not", async () => {
  const body = { model: "m", messages: [{ role: "user", content: "Count." }], max_tokens: 32, seed: 5 };
  const full = (await client.chat.completions.create(body)).choices[0].message.content;
  const chars = Array.from(full);  // code points: a stop never splits a surrogate pair
  assert.ok(chars.length >= 4, full);
  const stop = chars.slice(2, 4).join("");  // two characters from inside the answer
  const want = full.slice(0, full.indexOf(stop));
  const whole = await client.chat.completions.create({ ...body, stop: [stop] });
  assert.equal(whole.choices[0].message.content, want);
  assert.equal(whole.choices[0].finish_reason, "stop");
  const stream = await client.chat.completions.create({ ...body, stop, stream: true });
  let text = "", finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, want);
  assert.equal(finish, "stop");
});

await check("an unsupported field is a 400 naming it", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 2,
      tools: [{ type: "function", function: { name: "f", parameters: {} } }] }),
    (e) => e.status === 400 && e.param === "tools" && /'tools'/.test(e.message));
});

await check("completion stream", async () => {
  const stream = await client.completions.create({ model: "m", prompt: "Go", max_tokens: 8, stream: true });
  let n = 0;
  for await (const chunk of stream) n += chunk.choices.length;
  assert.ok(n > 0);
});

await check("abort mid-stream leaves the server serving", async () => {
  const ac = new AbortController();
  const stream = await client.completions.create(
    { model: "m", prompt: "long", max_tokens: 64, steps: 64, stream: true }, { signal: ac.signal });
  try {
    for await (const _ of stream) { ac.abort(); }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === "AbortError", String(e));
  }
  const r = await client.completions.create({ model: "m", prompt: "after", max_tokens: 4 });
  assert.equal(r.object, "text_completion");
});

for (const [name, body, status] of [
  ["max_tokens 0", { prompt: "x", max_tokens: 0 }, 400],
  ["negative temperature", { prompt: "x", temperature: -1 }, 400],
  ["token id out of vocabulary", { prompt: [1, 1e9] }, 400],
  ["block length not dividing", { prompt: "x", max_tokens: 8, block_length: 3 }, 400],
]) {
  await check(`error: ${name}`, async () => {
    await assert.rejects(client.completions.create({ model: "m", ...body }), (e) => {
      assert.ok(e instanceof OpenAI.APIError, String(e));
      assert.equal(e.status, status);
      assert.equal(e.type, "invalid_request_error");
      return true;
    });
  });
}

await check("error: malformed messages", async () => {
  await assert.rejects(client.chat.completions.create({ model: "m", messages: [{ role: 7, content: "x" }] }),
    (e) => e instanceof OpenAI.BadRequestError);
});

process.exit(failed);
