/**
 * The one HTML page the server writes itself: "you need the token", for a browser that opens an
 * API address without it. No script and no style (the CSP allows neither inline), plain words.
 */
export const UNAUTHORIZED_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>palaver: sign in</title></head>
<body>
<main>
<h1>This is palaver's chat, and it needs its token</h1>
<p>Open the address the gateway printed when it started:</p>
<pre>Chat with palaver at http://127.0.0.1:18790/#token=…</pre>
<p>The token is also in the file <code>web/token</code> in palaver's state folder (beside
<code>config.json</code>, usually <code>~/.palaver/web/token</code>), unless the config sets
<code>channels.web.token</code>. Add it to the page's address as <code>#token=&lt;token&gt;</code>.</p>
<p><a href="/">Back to the chat</a></p>
</main>
</body>
</html>
`;
