// Node's own fetch against shape's HTTP faults: N GETs of URL, one after
// another (kept alive by Node's agent); prints each status and the last
// body, and every header of the first answer that shape set.
const [url, times] = process.argv.slice(2);

(async () => {
  const statuses = [];
  let body = "";
  let retryAfter = null;
  for (let i = 0; i < Number(times); i++) {
    const response = await fetch(url);
    statuses.push(response.status);
    body = await response.text();
    if (i === 0) retryAfter = response.headers.get("retry-after");
  }
  console.log(`${statuses.join(" ")} ${body} retry-after=${retryAfter}`);
})().catch((err) => {
  console.log(`failed: ${err}`);
  process.exit(1);
});
