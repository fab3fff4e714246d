/**
 * Cluster mode's shared stores, assembled from the instance's database (cluster/node.ts): what
 * createAgent and the pairing gate use instead of files of this process's own. A root file because
 * it names approvals/ and pairing/, which sit above cluster/ in the layers.
 */
import { CHAT_RULES_DOCUMENT, FileChatRules } from "./approvals/chat-rules.js";
import { OPEN_QUESTIONS_DOCUMENT, QuestionBoard } from "./approvals/question-board.js";
import type { ClusterNode } from "./cluster/node.js";
import type { SharedStores } from "./create-agent.js";
import { DOCUMENT_NAMES } from "./db/documents.js";
import { PAIRING_DOCUMENT, PairingStore } from "./pairing/store.js";

export function sharedStoresOf(node: ClusterNode): SharedStores {
  return {
    sessions: node.sessions,
    cronStore: node.cronStore,
    chatRules: new FileChatRules(node.documents.document(DOCUMENT_NAMES.approvalRules, CHAT_RULES_DOCUMENT)),
    questionBoard: new QuestionBoard(
      node.documents.document(DOCUMENT_NAMES.openQuestions, OPEN_QUESTIONS_DOCUMENT),
      node.instance,
    ),
    memoryExclusive: node.memoryLock,
  };
}

export function sharedPairingOf(node: ClusterNode): PairingStore {
  return new PairingStore(node.documents.document(DOCUMENT_NAMES.pairing, PAIRING_DOCUMENT));
}
