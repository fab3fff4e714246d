import { FakeOpenAI } from "/work/main/tests/fakes/openai-server.ts";
let n = 0;
const fake = await FakeOpenAI.start({ handler: (req) => {
  const last = req.body.messages.at(-1);
  if (last?.role === "tool") return { content: "Done! I wrote **hello.txt** for you.\n\n- item one\n- `code`" };
  n++;
  if (String(last?.content).includes("write")) return { content: "Let me write it.", toolCalls: [{ name: "write_file", arguments: { path: "hello.txt", content: "hi\n" } }] };
  return { content: `# Reply ${n}\nYou said: ${String(last?.content)}`, delayMs: String(last?.content).includes("slow") ? 5000 : 0 };
}});
console.log(fake.baseURL);
process.stdin.resume();
