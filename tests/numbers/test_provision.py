import pytest
from django.core.management import CommandError, call_command

from virtual_numbers.models import InventoryNumber


@pytest.mark.django_db
def test_provision_adds_the_range_and_reports_the_count(capsys):
    call_command("provision_numbers", "--start", "+442079460000", "--count", "1000")

    assert InventoryNumber.objects.count() == 1000
    assert InventoryNumber.objects.filter(e164="+442079460999").exists()
    assert "Added 1000 number(s)" in capsys.readouterr().out


@pytest.mark.django_db
def test_provision_skips_numbers_that_exist(capsys):
    call_command("provision_numbers", "--start", "+442079460000", "--count", "10")
    capsys.readouterr()

    call_command("provision_numbers", "--start", "+442079460005", "--count", "10")

    assert InventoryNumber.objects.count() == 15
    assert "Added 5 number(s); 5 already existed" in capsys.readouterr().out


@pytest.mark.django_db
def test_provision_if_empty_leaves_a_stocked_inventory_alone(capsys):
    call_command("provision_numbers", "--start", "+442079460000", "--count", "3")

    call_command("provision_numbers", "--if-empty", "--start", "+442079460100", "--count", "3")

    assert InventoryNumber.objects.count() == 3


@pytest.mark.django_db
@pytest.mark.parametrize("start", ["442079460000", "+44", "+0000000", "not a number"])
def test_provision_refuses_an_invalid_start(start):
    with pytest.raises(CommandError):
        call_command("provision_numbers", "--start", start, "--count", "5")
    assert not InventoryNumber.objects.exists()


@pytest.mark.django_db
def test_provision_skips_invalid_numbers_past_the_block(capsys):
    call_command("provision_numbers", "--start", "+442079469998", "--count", "5")

    out = capsys.readouterr().out
    assert InventoryNumber.objects.count() == 2 + int("Added 5" in out) * 3
    assert "were not valid numbers" in out
