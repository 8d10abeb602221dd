// toxiproxy-node-client, the client from npm, drives a toxiproxy server:
// the scenario every client must pass. Usage: node toxiproxy_node.js
// API_PORT UPSTREAM, where UPSTREAM echoes what it is sent, with
// NODE_PATH naming the node_modules that hold the client. Prints 'ok' at
// the end; any failure exits non-zero.
"use strict";
const assert = require("assert");
const net = require("net");
const { Toxiproxy } = require("toxiproxy-node-client");

/** Milliseconds for one echo of `message` through `listen`. */
function roundTrip(listen, message = "ping") {
  const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.slice(listen.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const socket = net.connect({ host, port }, () => socket.write(message));
    let back = "";
    socket.setTimeout(30000, () => reject(new Error("no answer")));
    socket.on("data", (data) => {
      back += data;
      if (back.length >= message.length) {
        socket.destroy();
        assert.strictEqual(back, message);
        resolve(Number(process.hrtime.bigint() - start) / 1e6);
      }
    });
    socket.on("error", reject);
  });
}

/** Whether connecting to `listen` is refused. */
function refused(listen) {
  const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.slice(listen.lastIndexOf(":") + 1))];
  return new Promise((resolve) => {
    const socket = net.connect({ host, port }, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on("error", (err) => resolve(err.code === "ECONNREFUSED"));
  });
}

async function main() {
  const [port, upstream] = process.argv.slice(2);
  const toxiproxy = new Toxiproxy(`http://127.0.0.1:${port}`);
  assert.ok(await toxiproxy.getVersion());

  let proxy = await toxiproxy.createProxy({ name: "node_client", listen: "127.0.0.1:0", upstream });
  assert.match(proxy.listen, /^127\.0\.0\.1:[1-9]/);
  assert.ok("node_client" in (await toxiproxy.getAll()));
  assert.ok((await roundTrip(proxy.listen)) < 250);

  const toxic = await proxy.addToxic({ type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 300, jitter: 0 } });
  assert.strictEqual(toxic.name, "latency_downstream");
  let took = await roundTrip(proxy.listen);
  assert.ok(took >= 300 && took < 700, `${took} ms`);
  const changed = await toxic.update({ attributes: { latency: 100 } });
  assert.strictEqual(changed.attributes.latency, 100);
  took = await roundTrip(proxy.listen);
  assert.ok(took >= 100 && took < 500, `${took} ms`);

  proxy = await proxy.update({ enabled: false, listen: proxy.listen, upstream });
  assert.strictEqual(proxy.enabled, false);
  assert.ok(await refused(proxy.listen), "a disabled proxy refuses");
  proxy = await proxy.update({ enabled: true, listen: proxy.listen, upstream });
  assert.ok((await roundTrip(proxy.listen)) >= 100, "up again, with its toxic");

  await (await proxy.getToxic("latency_downstream")).remove();
  assert.ok((await roundTrip(proxy.listen)) < 250);

  await proxy.addToxic({ type: "bandwidth", stream: "upstream", toxicity: 1, attributes: { rate: 100 } });
  await toxiproxy.reset();
  await assert.rejects(proxy.getToxic("bandwidth_upstream"), "reset removes every toxic");

  await proxy.remove();
  await assert.rejects(toxiproxy.get("node_client"));
  assert.ok(await refused(proxy.listen));

  const populated = await toxiproxy.populate([{ name: "node_populated", listen: "127.0.0.1:0", upstream }]);
  const made = populated["node_populated"];
  assert.ok(made, "populate makes the proxy");
  assert.ok((await roundTrip(made.listen)) < 250);
  await made.remove();
  console.log("ok");
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
