/**
 * The names cluster mode keeps things under in the database. Apart from the modules that use the
 * database: the channels and the one-process commands name them without loading the PostgreSQL
 * client.
 */

/** The lease of each platform's single ingress, by the names the cluster shows (status, leaseHolders). */
export const INGRESS_LEASES = { telegram: "ingress:telegram", discord: "ingress:discord" } as const;

/** The leases an instance may hold. */
export const LEASES = Object.values(INGRESS_LEASES);

/** The documents' names (db/documents.ts): the base names of the state files they stand for. */
export const DOCUMENT_NAMES = {
  pairing: "pairing.json",
  approvalRules: "approval-rules.json",
  openQuestions: "open-questions.json",
} as const;
