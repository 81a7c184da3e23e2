-- expect-error: DP222 NotSupportedError
-- why: an analyst refunding their own quota
UPDATE dpgate.analysts SET epsilon_spent = 0;
