from django.contrib.admin.apps import AdminConfig


class RelayAdminConfig(AdminConfig):
    default_site = "relay.admin_site.RelayAdminSite"
