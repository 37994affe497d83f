// Upgrade and remove in Settings → Plugins (Global): the host API's capability review read
// as rows to show, and the person's choices turned into the upgrade's body. Pure.

const BEFORE_SAYS = {
  approved: "approved before: stays approved",
  declined: "declared before, not approved",
  new: "new: asked for the first time",
};

/**
 * The review's capabilities as rows: each with what it allows, where it stood, and whether
 * the person chooses it (`ask`) or it carries over (`carried`).
 */
export function reviewRows(review) {
  const capabilities = Array.isArray(review?.candidate?.capabilities) ? review.candidate.capabilities : [];
  return capabilities
    .filter((c) => c && typeof c.capability === "string")
    .map((c) => ({
      capability: c.capability,
      allows: typeof c.allows === "string" ? c.allows : "",
      before: c.before,
      says: BEFORE_SAYS[c.before] ?? String(c.before),
      choice: c.before === "approved" ? "carried" : "ask",
    }));
}

/** One line saying what the upgrade is: versions, and how many capabilities are new. */
export function reviewSummary(review) {
  const from = review?.current?.version ?? "?";
  const to = review?.candidate?.version ?? "?";
  const fresh = reviewRows(review).filter((r) => r.before === "new").length;
  const dropped = Array.isArray(review?.candidate?.dropped) ? review.candidate.dropped.length : 0;
  const parts = [`${review?.plugin ?? "plugin"} ${from} → ${to}`];
  parts.push(fresh ? `asks for ${fresh} new ${fresh === 1 ? "capability" : "capabilities"}` : "asks for nothing new");
  if (dropped) parts.push(`drops ${dropped} approved before`);
  if (review?.candidate?.signed === false) parts.push("unsigned");
  return parts.join(" · ");
}

/** The body of `PUT /global/plugins/{plugin}`: the reviewed image and version, and the chosen capabilities. */
export function upgradeBody(review, chosen) {
  const asked = new Set(reviewRows(review).filter((r) => r.choice === "ask").map((r) => r.capability));
  return {
    image: review.candidate.image,
    resourceVersion: review.current.resourceVersion,
    approve: [...chosen].filter((c) => asked.has(c)),
  };
}
