/**
 * Cluster mode's side of the gateway: the instance's node (cluster/node.ts) and what is assembled
 * from its database: the shared stores createAgent and the pairing gate use instead of files of
 * this process's own, and what channels use (leases, the web chat's relay and token). A root file
 * because it names approvals/, pairing/ and channels/, which sit above cluster/ in the layers.
 * Gateway.create loads it only when cluster.database is set: one process does not load the
 * PostgreSQL client.
 */
import { CHAT_RULES_DOCUMENT, FileChatRules } from "./approvals/chat-rules.js";
import { OPEN_QUESTIONS_DOCUMENT, QuestionBoard } from "./approvals/question-board.js";
import type { GatewayServices } from "./channels/platform.js";
import { PgWebRelay } from "./channels/web/pg-relay.js";
import { PgSharedToken } from "./channels/web/pg-token.js";
import { ClusterNode, type ClusterNodeOptions } from "./cluster/node.js";
import type { SharedStores } from "./create-agent.js";
import { DOCUMENT_NAMES } from "./db/names.js";
import { PAIRING_DOCUMENT, PairingStore } from "./pairing/store.js";

export interface ClusterSide {
  node: ClusterNode;
  /** What channels use of the cluster: leases for a single ingress, the web chat's relay and token. */
  services: Pick<GatewayServices, "lease" | "webRelay" | "webToken">;
  /** The pairing gate's store: the document "pairing.json". */
  pairing: PairingStore;
  /** createAgent's stores: sessions, cron jobs, approval rules, open questions, the memory lock. */
  shared: SharedStores;
}

export type JoinCluster = typeof joinCluster;

/** This instance's part of the cluster, not yet open (ClusterNode.open, at the gateway's start). */
export function joinCluster(opts: ClusterNodeOptions): ClusterSide {
  const node = new ClusterNode(opts);
  return {
    node,
    services: {
      lease: (name) => node.lease(name),
      webRelay: new PgWebRelay({ notifier: node.notifier, instance: node.instance, log: opts.log }),
      webToken: new PgSharedToken(node.db),
    },
    pairing: new PairingStore(node.documents.document(DOCUMENT_NAMES.pairing, PAIRING_DOCUMENT)),
    shared: {
      sessions: node.sessions,
      cronStore: node.cronStore,
      chatRules: new FileChatRules(
        node.documents.document(DOCUMENT_NAMES.approvalRules, CHAT_RULES_DOCUMENT),
      ),
      questionBoard: new QuestionBoard(
        node.documents.document(DOCUMENT_NAMES.openQuestions, OPEN_QUESTIONS_DOCUMENT),
        node.instance,
      ),
      memoryExclusive: node.memoryLock,
    },
  };
}
