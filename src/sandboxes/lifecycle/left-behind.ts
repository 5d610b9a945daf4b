/**
 * Replicas: which sandbox folders on this machine were left behind while this replica was dead
 * (pure: table-tested). A folder is left behind when its sandbox's row is gone (deleted through
 * another replica meanwhile) or names another replica (started there afresh, after this one's
 * lease ran out). A row with no owner yet (being provisioned) is not looked at.
 */
export function leftBehind(
  boxIds: readonly string[],
  owners: ReadonlyMap<string, string | null>,
  me: string,
): string[] {
  return boxIds.filter((id) => {
    if (!owners.has(id)) return true;
    const owner = owners.get(id) ?? null;
    return owner !== null && owner !== me;
  });
}
