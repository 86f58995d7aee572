"""Numerics stage: which numerical contract each op must follow, as data (policy files), not code.

Input: a policy name or file. Output: `Policy.rule_for(op, **keys) -> Rule`. It does not pick kernels.
"""

from kernelmap.numerics.policy import POLICY_DIR, Policy, Rule, load_policy, policy_names

__all__ = ["POLICY_DIR", "Policy", "Rule", "load_policy", "policy_names"]
