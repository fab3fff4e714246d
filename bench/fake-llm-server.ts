/**
 * Runs the fake OpenAI server as its own process, so that in a benchmark the
 * "remote" LLM does not share the event loop of the agent being measured.
 * Prints its base URL on the first line of stdout; exits when stdin closes.
 */
import { FakeOpenAI } from "../tests/fakes/openai-server.js";

const latencyMs = Number(process.argv[2] ?? 200);
const fake = await FakeOpenAI.start({ handler: () => ({ content: "hi", delayMs: latencyMs }) });
process.stdout.write(`${fake.baseURL}\n`);
process.stdin.resume();
process.stdin.on("end", () => void fake.close().then(() => process.exit(0)));
