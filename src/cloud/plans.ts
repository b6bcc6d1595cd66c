// Monthly allowances per plan. The specification names the plans (Idea, Startup, Growth)
// and says a workspace's databases share the plan's read and write allowances, but gives
// no amounts; these defaults are our choice (docs/cloud.md) and an operator changes them
// in the store (`PUT /admin/v1/plans/<plan>`, `svc cloud plan set`), so every gateway
// replica reads the same numbers.
import type { PlanAllowance } from './admin-store.js';
import { planNames, type PlanName } from './control-plane.js';

export const defaultPlanAllowances: Readonly<Record<PlanName, PlanAllowance>> = {
  Idea: { readsPerMonth: 1_000_000, writesPerMonth: 100_000 },
  Startup: { readsPerMonth: 25_000_000, writesPerMonth: 2_500_000 },
  Growth: { readsPerMonth: 250_000_000, writesPerMonth: 25_000_000 },
};

/** An allowance may be huge but stays an exact integer in both stores (BIGINT, JS number). */
export const allowancePerMonthMax = Number.MAX_SAFE_INTEGER;

export function isPlanName(value: unknown): value is PlanName {
  return typeof value === 'string' && (planNames as readonly string[]).includes(value);
}

/** A month as usage names it: `YYYY-MM`. */
export const monthPattern = /^\d{4}-(0[1-9]|1[0-2])$/;

/** `YYYY-MM` of the UTC month holding `at`: usage is metered per calendar month. */
export function monthOf(at: Date): string {
  return at.toISOString().slice(0, 7);
}
