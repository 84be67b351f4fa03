"""λ chosen on validation: each column at its own best validation λ, its test value reported, one
evaluation per grid point."""
from papers.freebind.lambda_selection import grid, select_on_validation


def test_select_on_validation_reports_the_test_value_at_each_columns_best_validation_lambda():
    points = grid([0.0, 0.5, 1.0], [0.0, 1.0])
    assert points[:3] == [(0.0, 0.0), (0.0, 1.0), (0.5, 0.0)] and len(points) == 6
    seen = []

    def val_row(lam):
        seen.append(lam)
        # a peaks at λ = (.5, 1); b is flat (a tie: the first grid point wins); c is not supported
        return {"a": -abs(lam[0] - 0.5) + lam[1], "b": 1.0, "c": None}

    def test_row(lam):
        return {"a": 100 * lam[0] + lam[1], "b": 7 + lam[0], "c": None}

    out = select_on_validation(val_row, test_row, points)
    assert seen == points and out["evaluations"] == 6          # one validation evaluation per point
    assert out["chosen"] == {"a": [0.5, 1.0], "b": [0.0, 0.0]}
    assert out["row"] == {"a": 51.0, "b": 7.0, "c": None}      # test values at the validation choice
