"""The gate (pure): given a trigger's facts and a policy, the decision and the rule that matched."""
