"""The scale benchmark's measurement of one size, and its table (the full run is `tfdpmech bench`)."""

from tfdpmech.cli_args import add_bench_arguments
from tfdpmech.experiments import scale_bench


def test_one_size_streams_every_record_once_and_releases_once():
    row = scale_bench.one(9000)  # 2 full batches of 4096 and a partial one
    assert row["n"] == 9000 and row["seconds"] > 0
    assert row["peak_rss_mb"] >= row["peak_rss_mb_before_pass"] > 0


def test_bench_has_a_no_scale_flag_and_the_table_reports_the_ratios():
    import argparse

    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    assert parser.parse_args(["--no-scale"]).no_scale and not parser.parse_args([]).no_scale
    row = {"n": 10, "seconds": 1.0, "us_per_record": 1e5, "records_per_s": 10.0, "peak_rss_mb": 100.0,
           "peak_rss_mb_before_pass": 90.0, "where": "host"}
    big = dict(row, n=1000, us_per_record=2e3, peak_rss_mb=110.0)
    table = scale_bench.format_table({"sizes": [row, big], "memory_ratio_largest_to_smallest": 1.1,
                                      "time_per_record_ratio_largest_to_smallest": 0.02,
                                      "mirrored": {"one_device": row, "two_devices": dict(row, records_per_s=15.0),
                                                   "speedup_two_over_one": 1.5}})
    assert "1.100×" in table and "×1.50" in table and "| 1,000 |" in table
