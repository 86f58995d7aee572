"""codegen/emit.py gguf_copy_ranges: the GGUF pages a copying load reads (the head and the tensors some op reads
whole), widened to 4 KiB pages, merged, clamped to the file's last page; everything else stays file-mapped."""

from kernelmap.codegen.emit import PAGE, gguf_copy_ranges


def test_head_alone_is_one_page_range():
    assert gguf_copy_ranges(10 * PAGE, 100, []) == ((0, PAGE),)


def test_ranges_widen_to_pages_and_merge_when_they_touch_or_overlap():
    size = 40 * PAGE + 123  # the last page is partial: ranges end at most at its end
    dense = [(5 * PAGE + 10, 100),      # inside page 5
             (6 * PAGE, PAGE),          # page 6: touches page 5's range -> one range
             (20 * PAGE - 1, 2),        # straddles pages 19 and 20
             (40 * PAGE, 123),          # the file's partial last page
             (30 * PAGE, 0)]            # empty tensors copy nothing
    assert gguf_copy_ranges(size, PAGE + 1, dense) == (
        (0, 2 * PAGE), (5 * PAGE, 7 * PAGE), (19 * PAGE, 21 * PAGE), (40 * PAGE, 41 * PAGE))


def test_unsorted_and_nested_inputs_give_sorted_disjoint_ranges():
    got = gguf_copy_ranges(100 * PAGE, 10, [(50 * PAGE, 10 * PAGE), (52 * PAGE, PAGE), (8 * PAGE, 3)])
    assert got == ((0, PAGE), (8 * PAGE, 9 * PAGE), (50 * PAGE, 60 * PAGE))
    assert all(a < b < c for (a, b), (c, _) in zip(got, got[1:], strict=False))
